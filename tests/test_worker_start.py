"""A worker's start is bounded by the CPU it spends, not by the clock (issue 38, item 6): on a loaded machine a
start takes longer by the clock and still succeeds, and a start that spins in a loop is still stopped.
The children are real processes (`tests/hostile_child.py`'s `sleep` and `spin` modes)."""

from __future__ import annotations

import time
from pathlib import Path

from coco_sql.child import ChildProcess
from coco_sql.sandbox.supervisor import receive_within_cpu
from coco_sql.wire import MessageType, Protocol

READY = Protocol.of("the test child", 1024, MessageType("ready", {}))


def _child(mode: str, tmp_path: Path) -> ChildProcess:
    return ChildProcess.start("tests.hostile_child", mode, str(tmp_path / "marker"), receives=READY)


def test_a_start_that_waits_without_cpu_is_not_cut_by_the_clock(tmp_path: Path) -> None:
    worker = _child("sleep", tmp_path)  # answers after 3 s of sleep: three times its CPU budget by the clock
    try:
        began = time.monotonic()
        assert receive_within_cpu(worker, 1.0, time.monotonic() + 60.0) == {"type": "ready"}
        assert time.monotonic() - began >= 2.5
    finally:
        worker.stop(kill=True)


def test_a_start_that_spins_is_stopped_by_its_cpu_time(tmp_path: Path) -> None:
    worker = _child("spin", tmp_path)
    try:
        began = time.monotonic()
        assert receive_within_cpu(worker, 1.0, time.monotonic() + 60.0) is None
        spent = worker.cpu_seconds()
        assert spent is not None and spent >= 1.0  # stopped by what it spent, long before the backstop
        assert time.monotonic() - began < 30.0
    finally:
        worker.stop(kill=True)
