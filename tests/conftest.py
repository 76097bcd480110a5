"""Shared fixtures: temporary stores, copies of the lockpicking6 pack, and the CLI runner."""

from __future__ import annotations

import compileall
import io
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from coco_sql.child import ChildProcess
from coco_sql.sandbox.fork_server import WorkerTemplate
from coco_sql.wire import Protocol

REPO = Path(__file__).resolve().parents[1]
LOCKPICKING6 = REPO / "tasks" / "lockpicking6"
SEED_SQL = LOCKPICKING6 / "seed.sql"

# Bytecode caches, even where PYTHONDONTWRITEBYTECODE is set (it is on our CI machine): without them each xdist
# worker rewrote and compiled every test module at collection, and each of the suite's Python subprocesses (the CLI
# runs, the sandbox and dbt workers: hundreds) compiled the coco_sql modules it imports from source. The caches go
# to __pycache__ folders, which git ignores. Set here, before pytest imports any test module.
sys.dont_write_bytecode = False

# The test files that take longest (CPU seconds of the test process and its children, measured file by file on
# 2026-12-02), heaviest first. `make test` hands whole files to its workers (--dist loadfile) in collection order
# (--no-loadscope-reorder): these start first and the many short files fill in at the end, so that the workers
# finish together. (xdist's own order, the files with the most tests first, left these few-test whole runs for
# last.) A file not listed keeps its place after them; the tests of a file keep their order.
HEAVY_FIRST = (
    "test_agent_spec_evolve.py",
    "test_docs_dbt.py",  # the dbt page's quick start: dbt's worker, a run, an export and `dbt build`
    "test_dbt_warehouse.py",  # from main after the measurement: one test took 343 s at load 10
    "test_loop.py",
    "test_snowpark.py",
    "test_dbt_sandbox.py",
    "test_history.py",
    "test_procedures.py",
    "test_agent.py",
    "test_columnar_outcome.py",
    "test_report_html.py",
    "test_cli.py",
    "test_minibatch.py",
    "test_analyst_path.py",
    "test_dbt_sql.py",
    "test_deploy_cost.py",
    "test_champion.py",
    "test_cortex_catalogue.py",
    "test_docs_analyst.py",
    "test_docs_agents.py",
    "test_dbt_kind.py",
    "test_model_aliases.py",
    "test_screening.py",
    "test_aifuncs.py",
    "test_evaluate.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """HEAVY_FIRST's files first; a stable sort, so the order pytest-randomly shuffled the files and tests into
    (it runs before this hook) stays within the rest."""
    rank = {name: n for n, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The order's seed, last (also under -q, which hides pytest-randomly's header line): the same seed gives the
    same order again; `-p no:randomly` runs the files and tests as written."""
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int) and getattr(config.option, "randomly_reorganize", False):
        terminalreporter.write_line(f"test order: --randomly-seed={seed} (pytest-randomly)")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the package once (in the controller, before the workers start), for the modules only the
    subprocesses import (the sandbox and dbt workers)."""
    if hasattr(session.config, "workerinput"):
        return
    compileall.compile_dir(REPO / "coco_sql", quiet=1)


CliRunner = Callable[..., subprocess.CompletedProcess[str]]
PackCopier = Callable[..., Path]


def run_cli(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI with ARGS in `cwd` (with `env`, default the current one) and capture its text.

    It runs in this process: `coco_sql.cli.run(ARGS)`, with its own stdout, stderr, working directory,
    environment, warning filters and root log handlers, and its exit code as `python -m coco_sql.cli` would
    give it (an uncaught exception prints its traceback to stderr and exits 1). A subprocess paid about 1-3 s
    of CPU in imports for each of the suite's ~150 runs. A test that must kill the CLI, or see what a fresh
    interpreter imports, starts `python -m coco_sql.cli` itself."""
    return _cli_in_process([str(a) for a in args], cwd, env)


def _cli_in_process(
    argv: list[str], cwd: Path, env: dict[str, str] | None
) -> subprocess.CompletedProcess[str]:
    from coco_sql import cli

    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("run_cli runs the CLI in this process, on the main thread only")
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, handlers = dict(os.environ), os.getcwd(), logging.getLogger().handlers[:]
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        os.chdir(cwd)
        with redirect_stdout(out), redirect_stderr(err), warnings.catch_warnings():
            try:
                code = cli.run(argv)
            except SystemExit as stop:  # argparse's usage errors and --help
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            except Exception:
                traceback.print_exc()
                code = 1
    finally:
        logging.getLogger().handlers[:] = handlers
        os.chdir(saved_cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(saved_env)
    return subprocess.CompletedProcess(["coco-sql", *argv], code, out.getvalue(), err.getvalue())


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """Where a test's DuckDB store lives (not created yet)."""
    return tmp_path / "coco.duckdb"


@pytest.fixture
def cli(tmp_path: Path) -> CliRunner:
    """The CLI (`run_cli`), run from tmp_path so no stray store lands in the repository."""

    def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, cwd=tmp_path)

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

        def fork(template: WorkerTemplate, receives: Protocol) -> ChildProcess:  # the sandboxes' workers
            return real_start(ChildProcess, "tests.hostile_child", mode, str(marker), receives=receives)

        monkeypatch.setattr(ChildProcess, "start", classmethod(start))
        monkeypatch.setattr(WorkerTemplate, "start", fork)

    return install
