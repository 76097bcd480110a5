"""The strict emulation of a Snowflake stored procedure's limits (`engines.snowflake.strict`), on a real
local-testing session with a real procedure registered: what a handler may not do is refused and counted, and
the same calls outside a handler, or after the block, work. The sandboxes coco-sql used inside a procedure until
now (the DuckDB worker of the probes, the Python zygote) are refused there.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')")
from snowflake.snowpark import Session
from snowflake.snowpark.mock.exceptions import SnowparkLocalTestingException
from snowflake.snowpark.types import StringType

from coco_sql.engines.snowflake.strict import StrictLimits, strict_procedures
from coco_sql.sandbox import Sandbox
from coco_sql.sandbox.python_sandbox import PythonSandbox


def _noop() -> None:
    """A multiprocessing target (module level: the spawn start method imports it)."""


def _spawn() -> None:
    process = multiprocessing.get_context("spawn").Process(target=_noop)
    process.start()
    process.join()


def _session_from_another_thread(session: Session) -> None:
    errors: list[BaseException] = []

    def use() -> None:
        try:
            session.table("T").collect()
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=use)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


# A directory outside /tmp whatever the checkout (CI may clone into /tmp): the home directory.
OUTSIDE_TMP = Path.home()
assert not str(OUTSIDE_TMP).startswith("/tmp"), OUTSIDE_TMP

ACTIONS: dict[str, tuple[str, Callable[[Session], object]]] = {
    "subprocess": ("process", lambda s: subprocess.run(["true"], check=True)),
    "os.system": ("process", lambda s: os.system("true")),
    "fork": ("process", lambda s: os.fork()),
    "posix_spawn": ("process", lambda s: os.posix_spawn("/bin/true", ["true"], dict(os.environ))),
    "multiprocessing spawn": ("process", lambda s: _spawn()),
    "socket": ("socket", lambda s: socket.socket()),
    "write outside /tmp": ("file", lambda s: OUTSIDE_TMP.joinpath("coco-strict-probe.txt").write_text("x")),
    "mkdir outside /tmp": ("file", lambda s: OUTSIDE_TMP.joinpath("coco-strict-dir").mkdir()),
    "the session from another thread": ("thread", _session_from_another_thread),
}


@pytest.fixture
def session() -> Iterator[Session]:
    """A local-testing session with a table T and a procedure `act(what)` that does one of `ACTIONS` and
    answers 'done' or the error it met."""
    session = Session.builder.config("local_testing", True).create()
    session.create_dataframe(pd.DataFrame({"A": [1, 2]})).write.save_as_table("T")

    def act(session: Session, what: str) -> str:
        try:
            ACTIONS[what][1](session)
        except Exception as error:
            return f"{type(error).__name__}: {error}"
        return "done"

    session.sproc.register(
        act, name="act", input_types=[StringType()], return_type=StringType(), replace=True
    )
    yield session
    session.close()


@pytest.mark.parametrize("what", ACTIONS, ids=ACTIONS)
def test_what_a_procedure_may_not_do_is_refused_and_counted(session: Session, what: str) -> None:
    kind = ACTIONS[what][0]
    with strict_procedures(session) as limits:
        answer = session.call("act", what)
    assert answer.startswith("PermissionError: not allowed in a Snowflake stored procedure"), answer
    assert limits.refused == {kind: 1} and limits.calls == 1
    with pytest.raises(AssertionError, match=f"broke Snowflake's limits {{'{kind}': 1}}"):
        limits.check()


def test_the_same_calls_outside_a_handler_or_the_block_work(session: Session, tmp_path: Path) -> None:
    with strict_procedures(session) as limits:
        subprocess.run([sys.executable, "-c", "pass"], check=True)  # the test itself, not a handler
        socket.socket().close()
        _session_from_another_thread(session)
        answer = session.call("act", "socket")
    assert answer.startswith("PermissionError") and limits.refused == {"socket": 1}
    assert session.call("act", "socket") == "done"  # after the block: local testing's own permissiveness
    assert not OUTSIDE_TMP.joinpath("coco-strict-probe.txt").exists()


def test_writes_under_tmp_are_allowed(session: Session, tmp_path: Path) -> None:
    target = tmp_path / "inside.txt"
    ACTIONS["write under /tmp"] = ("file", lambda s: target.write_text("x"))
    try:
        with strict_procedures(session) as limits:
            assert session.call("act", "write under /tmp") == "done"
    finally:
        del ACTIONS["write under /tmp"]
    assert target.read_text() == "x" and limits.refused == {}
    limits.check()


def test_yesterdays_sandboxes_are_refused_inside_a_procedure(session: Session) -> None:
    """Until issue 27 a procedure's probes ran in a DuckDB worker process and a Python task's programs in a
    forked zygote: both start a process, which a stored procedure may not."""
    frame = pd.DataFrame({"id": ["a"], "x": [1]})
    with Sandbox(
        frame
    ) as outside:  # this process's worker template is running: a fork request is a start too
        assert outside.run("SELECT 1", 5.0).rows == [(1,)]
    ACTIONS["duckdb sandbox"] = ("process", lambda s: Sandbox(frame).run("SELECT 1", 5.0))
    ACTIONS["python sandbox"] = (
        "process",
        lambda s: PythonSandbox([("a", {"x": 1})], harness="def run(entry, instance):\n    return 1\n",
                                entry="main", modules=()).run("def main(i):\n    return 1\n", 5.0),
    )  # fmt: skip
    try:
        with strict_procedures(session) as limits:
            answers = [session.call("act", "duckdb sandbox"), session.call("act", "python sandbox")]
    finally:
        del ACTIONS["duckdb sandbox"], ACTIONS["python sandbox"]
    assert all("not allowed in a Snowflake stored procedure" in a for a in answers), answers
    assert limits.refused["process"] >= 2


def test_an_uncaught_refusal_fails_the_call(session: Session) -> None:
    def fork(session: Session) -> str:
        return str(os.fork())

    session.sproc.register(fork, name="fork", input_types=[], return_type=StringType(), replace=True)
    with (
        strict_procedures(session) as limits,
        pytest.raises(SnowparkLocalTestingException, match=r"os\.fork"),
    ):
        session.call("fork")
    assert limits.refused == {"process": 1}
    assert isinstance(limits, StrictLimits)
