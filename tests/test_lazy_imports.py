"""`coco-sql --help` and `coco-sql tasks` load no heavy library (issue 28: under 0.5 s of CPU; measured in the
README with /usr/bin/time): neither pandas, DuckDB, sqlglot, scipy nor jinja2 is imported, checked in a fresh
interpreter. Listing packs reads task.toml only: a pack whose task.toml does not parse is listed as broken."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coco_sql.tasks.catalog import summaries

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "duckdb", "sqlglot", "scipy", "jinja2")  # numpy (0.06 s) is allowed

PROBE = """
import contextlib, io, sys
from coco_sql.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main({argv!r})
print(",".join(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


@pytest.mark.parametrize("argv", [["--help"], ["tasks"], ["evolve", "--help"]], ids=" ".join)
def test_the_cli_lists_and_helps_without_heavy_imports(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == "", f"{argv} imported {done.stdout.strip()}"


def test_listing_reads_task_toml_only_and_names_a_broken_one(tmp_path: Path) -> None:
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "task.toml").write_text(
        'name = "good"\ndescription = "A pack."\n[data]\npool = "x"\n'
    )
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "task.toml").write_text("name = [unclosed\n")
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "task.toml").write_text('name = "none"\n')
    (tmp_path / "not_a_pack").mkdir()
    listed = dict(summaries([tmp_path]))
    assert listed["good"] == "A pack."  # its missing data file is load_task's to find
    assert listed["bad"].startswith("(broken: task.toml does not parse: ")
    assert listed["none"] == "(broken: task.toml has no one-line description)"
    assert set(listed) == {"good", "bad", "none"}
