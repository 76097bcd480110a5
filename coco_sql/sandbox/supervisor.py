"""The lifecycle both sandboxes share: one worker process at a time, started on first use with a handshake,
replaced after a kill, a crash or a memory error, and reaped with its peak memory recorded.

A sandbox composes a `Supervisor` and keeps only what is its own: the messages of its protocol and how it reads
their answers. Callers hold `supervisor.lock` around a whole exchange with the worker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from coco_sql.child import ChildDied, ChildMisbehaved, ChildProcess
from coco_sql.errors import EvaluationError, EvaluationTimeout

START_TIMEOUT_S = (
    60.0  # a worker's start is bounded by its own CPU time, not the clock (a busy machine waits)
)
START_BACKSTOP_S = 600.0  # ... and by this much wall time, for a worker that hangs without using the CPU
START_POLL_S = 0.25


class Supervisor:
    """Owns the worker of one sandbox. `start()` must return a started worker that has answered its handshake
    (`handshake` does that); `ensure()` starts one when there is none; `discard()` ends the current one."""

    def __init__(self, start: Callable[[], ChildProcess]) -> None:
        self._start = start
        self.lock = threading.Lock()
        self.worker: ChildProcess | None = None
        self.restarts = (
            0  # workers replaced after a kill, a crash or a memory error (for tests and benchmarks)
        )
        self.last_worker_peak_rss: int | None = None  # bytes, of the last worker that ended

    def ensure(self) -> ChildProcess:
        if self.worker is None:
            self.worker = self._start()
        return self.worker

    def discard(self, *, kill: bool) -> None:
        """End the current worker (SIGKILL with `kill`, else close its pipes); the next call starts a new one.
        A killed worker, or one that had died on its own, counts as a restart."""
        if self.worker is None:
            return
        if kill or not self.worker.alive():
            self.restarts += 1
        self.worker.stop(kill=kill)
        self.last_worker_peak_rss = self.worker.peak_rss_bytes
        self.worker = None

    def replaced(self) -> None:
        """Count a process the worker itself replaced (the Python sandbox's process of one program, killed or
        dead)."""
        self.restarts += 1

    @property
    def worker_pid(self) -> int | None:
        return None if self.worker is None else self.worker.pid

    def close(self) -> None:
        with self.lock:
            self.discard(kill=False)


class SupervisedSandbox:
    """What a sandbox built on a `Supervisor` exposes about its worker, and its closing; the subclass sets
    `self._supervisor` in its constructor."""

    _supervisor: Supervisor

    @property
    def worker_pid(self) -> int | None:
        return self._supervisor.worker_pid

    @property
    def restarts(self) -> int:
        """Workers replaced after a kill, a crash, a memory error (or, for Python, their CPU cap)."""
        return self._supervisor.restarts

    @property
    def last_worker_peak_rss(self) -> int | None:
        """Peak resident memory (bytes) of the last worker that ended."""
        return self._supervisor.last_worker_peak_rss

    def close(self) -> None:
        self._supervisor.close()

    def __enter__(self):  # type: ignore[no-untyped-def]
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def handshake(
    worker: ChildProcess, init: dict[str, Any], what: str, *, blobs: Sequence[bytes] = ()
) -> dict[str, Any]:
    """Send the worker its `init` message (and the frames `blobs` after it) and wait for its `ready` message,
    which it returns. EvaluationError naming `what` when it dies, breaks its protocol or does not answer in
    time; the worker is stopped then."""
    try:
        worker.send(init)
        for blob in blobs:
            worker.send_bytes(blob)
        ready = receive_within_cpu(worker, START_TIMEOUT_S, time.monotonic() + START_BACKSTOP_S)
    except ChildDied as death:
        worker.stop(kill=True)
        raise EvaluationError(f"{what} could not start ({death})") from None
    except ChildMisbehaved as error:
        worker.stop(kill=True)
        raise EvaluationError(f"{what} could not start: {error}") from None
    if ready is None or ready["type"] != "ready":
        worker.stop(kill=True)
        raise EvaluationError(f"{what} did not start in time")
    return ready


def receive_within_cpu(
    worker: ChildProcess,
    cpu_s: float,
    hard_stop: float,
    *,
    poll_s: float = START_POLL_S,
    receive: Callable[[float], dict[str, Any] | None] | None = None,
) -> dict[str, Any] | None:
    """The worker's next message (`receive(until)`, default `worker.receive`), or None once the worker has spent
    `cpu_s` seconds of its own CPU time without one (the kernel's count, read every `poll_s`), or the clock
    reaches `hard_stop` (time.monotonic), the backstop for a worker that hangs without using the CPU. On a
    loaded machine a worker takes longer by the clock, not by the CPU it needs, so the same work gets the same
    verdict at any load. Without /proc the clock is all there is: `cpu_s` of wall time."""
    receive = receive or (lambda until: worker.receive(until=until))
    started = worker.cpu_seconds()
    if started is None:
        hard_stop = min(hard_stop, time.monotonic() + cpu_s)
    while True:
        now = time.monotonic()
        if now >= hard_stop:
            return None
        message = receive(min(hard_stop, now + poll_s))
        if message is not None:
            return message
        spent = worker.cpu_seconds()
        if started is not None and spent is not None and spent - started > cpu_s:
            return None


def over_time(what: str, deadline_s: float, how: str) -> EvaluationTimeout:
    """'<what> exceeded its <deadline> s deadline and was <stopped|killed>'."""
    return EvaluationTimeout(f"{what} exceeded its {deadline_s:g} s deadline and was {how}")
