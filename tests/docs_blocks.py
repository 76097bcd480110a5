"""The docs' code blocks as the tests run them (tests/test_docs*.py): read from the page, run as written.

A shell block runs line by line in one working folder and one environment: `export NAME=VALUE ...` sets the
environment of the lines after it; a line that is one `coco-sql` command (optionally with `> FILE`) runs in this
process (`run_cli`: the same `coco_sql.cli.run` the installed command calls, without a new interpreter's imports);
any other line (`cd X && dbt build`, a pipe) runs in bash, with this interpreter's bin folder first on PATH so
that `coco-sql` and `dbt` are the ones installed with it. A line that fails fails the test with its output.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import run_cli

DOCS = Path(__file__).resolve().parents[1] / "docs"
USER_PAGES = ("analyst.md", "dbt.md", "agents.md", "snowflake.md")
SHELL = {"sh", "bash", "shell"}
SPECIAL = re.compile(r"[|&;<$`(){}]|^cd\b")


def blocks(page: str, languages: set[str]) -> list[str]:
    """The page's fenced code blocks in `languages`, in order."""
    text = (DOCS / page).read_text()
    return [
        body
        for lang, body in re.findall(r"^```(\w+)\n(.*?)^```", text, flags=re.S | re.M)
        if lang in languages
    ]


def commands_named(page: str) -> list[str]:
    """Every whole `coco-sql COMMAND ARGUMENT...` line the page names in inline code, outside its code blocks and
    comments (a bare `coco-sql evolve` names a command, not a command line)."""
    text = re.sub(r"^```.*?^```|<!--.*?-->", "", (DOCS / page).read_text(), flags=re.S | re.M)
    return [c for c in re.findall(r"`(coco-sql [^`]+)`", text) if len(c.split()) > 2]


@dataclass
class Shell:
    cwd: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    outputs: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["NO_MKDOCS_2_WARNING"] = "1"

    def run(self, block: str, timeout: float = 600) -> None:
        for line in (raw.strip() for raw in block.splitlines()):
            if not line or line.startswith("#"):
                continue
            if line.startswith("export "):
                for assignment in shlex.split(line)[1:]:
                    name, _, value = assignment.partition("=")
                    self.env[name] = value
                continue
            target = None
            command = line
            if " > " in line and not SPECIAL.search(line.split(" > ")[0]):
                command, target = (part.strip() for part in line.split(" > ", 1))
            if command.startswith("coco-sql ") and not SPECIAL.search(command):
                done = run_cli(*shlex.split(command)[1:], cwd=self.cwd, env=self.env)
            else:
                done = subprocess.run(["bash", "-c", line], cwd=self.cwd, env=self.env, capture_output=True,
                                      text=True, timeout=timeout)  # fmt: skip
                target = None
            assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            if target is not None:
                (self.cwd / target).write_text(done.stdout)
            self.outputs.append(done.stdout + done.stderr)
