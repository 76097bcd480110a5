"""The docs site (issue 40): it builds with `mkdocs build --strict`, its generated reference pages are what the code
says today, every command a user-path page names parses, and the Snowflake administrator's page runs (its shell
block as written; its worksheet on a DuckDB connection, where the same procedures live)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import coco_sql
from coco_sql.cli import _parser
from coco_sql.languages.dbt.options import TASK_OPTIONS as DBT_TASK_OPTIONS
from coco_sql.options import TASK_OPTIONS
from tests.docs_blocks import DOCS, USER_PAGES, Shell, blocks, commands_named

REPO = DOCS.parent


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "reference" / "cli" / "index.html").exists()


def test_the_generated_pages_are_current() -> None:
    done = subprocess.run([sys.executable, "scripts/make_docs.py", "--check"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    options = (DOCS / "reference" / "options.md").read_text()
    for table in (TASK_OPTIONS, DBT_TASK_OPTIONS):  # what coco_help prints is on the page
        for row in table.rows():
            assert f"| `{row['name']}` | {row['type']} |" in options
    cli = (DOCS / "reference" / "cli.md").read_text()
    assert "cortex_agent" in cli and "## demo-agent-server" in cli and "`--version`" in cli


@pytest.mark.parametrize("page", USER_PAGES)
def test_every_command_a_page_names_parses(page: str) -> None:
    parser = _parser()
    named = commands_named(page) + [
        line.strip() for block in blocks(page, {"sh"}) for line in block.splitlines()
        if line.strip().startswith("coco-sql ")
    ]  # fmt: skip
    assert named, page
    for command in named:
        argv = shlex.split(command.split(" > ")[0])[1:]
        if "--help" in argv:
            continue
        try:
            parser.parse_args(argv)
        except SystemExit:  # argparse's way to refuse an unknown command, flag or choice
            pytest.fail(f"{page}: {command!r} does not parse")


def test_the_snowflake_page_runs_its_shell_block_and_its_worksheet_on_duckdb(tmp_path: Path) -> None:
    (shell,) = blocks("snowflake.md", {"sh"})
    Shell(tmp_path).run(shell)
    script = (tmp_path / "deploy.sql").read_text()
    assert "CREATE OR REPLACE PROCEDURE coco_evolve" in script.replace("\n", " ") or "coco_evolve" in script
    (worksheet,) = blocks("snowflake.md", {"sql"})
    con = coco_sql.connect(str(tmp_path / "worksheet.duckdb"))
    try:
        results = []
        for statement in con.extract_statements(worksheet):
            cursor = con.execute(statement)
            results.append(cursor.fetchall() if cursor.description else None)
    finally:
        con.close()
    summary = next(r for r in results if r and len(r[0]) == 12 and r[0][1] == "signals")[0]
    assert summary[2] == 2 and summary[5] > summary[4]  # two iterations; the champion beats the seed
    exported = next(r for r in results if r and len(r[0]) == 6 and r[0][3] == "snowflake_function")[0]
    assert "CREATE OR REPLACE FUNCTION coco_signals_champion()" in exported[4]
    assert results[-1] == [("finished", 2, pytest.approx(summary[5]), results[-1][0][3])]


def test_the_readme_is_short_and_keeps_the_two_commands() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 150
    assert "make demo   #" in readme and "make test   #" in readme  # what .ci/run and the Makefile expect
    for page in USER_PAGES:
        assert f"(docs/{page})" in readme
    for target in re_links(readme):
        assert (REPO / target).exists(), target


def re_links(text: str) -> list[str]:
    import re

    return [t for t in re.findall(r"\]\(([^)#]+)\)", text) if not t.startswith("http")]
