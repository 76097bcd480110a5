"""Shared fixtures: temporary stores, copies of the lockpicking6 pack, and a subprocess CLI runner."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from coco_sql.child import ChildProcess

REPO = Path(__file__).resolve().parents[1]
LOCKPICKING6 = REPO / "tasks" / "lockpicking6"
SEED_SQL = LOCKPICKING6 / "seed.sql"

CliRunner = Callable[..., subprocess.CompletedProcess[str]]
PackCopier = Callable[..., Path]


def run_cli(
    *args: str | Path, cwd: Path, timeout: float = 60.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m coco_sql.cli ARGS` in `cwd` (with `env`, default the current one) and capture its text."""
    return subprocess.run(
        [sys.executable, "-m", "coco_sql.cli", *map(str, args)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """Where a test's DuckDB store lives (not created yet)."""
    return tmp_path / "coco.duckdb"


@pytest.fixture
def cli(tmp_path: Path) -> CliRunner:
    """The CLI as a subprocess, run from tmp_path so no stray store lands in the repository."""

    def run(*args: str | Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, cwd=tmp_path, timeout=timeout)

    return run


@pytest.fixture
def copy_pack(tmp_path: Path) -> PackCopier:
    """Copy lockpicking6 into tmp_path; optionally set [program] timeout_seconds or replace task.toml text.

    Each copy lives in its own parent directory, because a pack's directory must be named after the task.
    """
    counter = iter(range(1_000_000))

    def copy(*, timeout: float | None = None, toml: str | bytes | None = None) -> Path:
        root = tmp_path / f"packs{next(counter)}" / "lockpicking6"
        shutil.copytree(LOCKPICKING6, root)
        task_toml = root / "task.toml"
        if timeout is not None:
            text, n = re.subn(
                r"(?m)^timeout_seconds = .*$", f"timeout_seconds = {timeout}", task_toml.read_text()
            )
            assert n == 1, "lockpicking6/task.toml no longer has one timeout_seconds line"
            task_toml.write_text(text)
        if isinstance(toml, bytes):
            task_toml.write_bytes(toml)
        elif toml is not None:
            task_toml.write_text(toml)
        return root

    return copy


@pytest.fixture
def fast_pack(copy_pack: PackCopier) -> Path:
    """A lockpicking6 copy whose programs get a 1 s deadline."""
    return copy_pack(timeout=1.0)


@pytest.fixture
def hostile_child(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, Path], None]:
    """`install(mode, marker)`: every child process started from then on runs tests/hostile_child.py instead."""
    real_start = ChildProcess.start.__func__  # type: ignore[attr-defined]

    def install(mode: str, marker: Path) -> None:
        def start(cls, module, *args, **kwargs):  # type: ignore[no-untyped-def]
            return real_start(cls, "tests.hostile_child", mode, str(marker), **kwargs)

        monkeypatch.setattr(ChildProcess, "start", classmethod(start))

    return install
