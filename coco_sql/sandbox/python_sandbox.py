"""The sandbox every Python candidate runs in: one split's instances in a worker process with hard limits.

What it blocks, and how (the worker's side, layer by layer, is `sandbox.python_worker`). Every claim has a test
in tests/test_python_language.py whose program gets past the validator and the restricted builtins (it walks
`object.__subclasses__()` to the real `open`, `__import__` and socket class), once per kernel layer alone, next
to a control run without the kernel layers that shows the same program succeeding:

- **No other split.** The worker receives one split's instances (inputs only, never the expected values), so
  no other split exists in its memory; and no file can be opened once a program runs (seccomp refuses every
  open; the chroot layer leaves nothing to open), so neither the pack's data files nor /proc (the parent's
  memory) can be read.
- **No network.** seccomp refuses to create a socket; the network namespace has only a loopback interface
  that is down, so not even 127.0.0.1 of the machine is reachable; the socket constructors raise in-process.
- **No file writes.** RLIMIT_FSIZE = 0; seccomp refuses to open, create, truncate, rename, link or delete a
  file; with the chroot layer nothing but an empty folder is visible. seccomp also refuses fork, clone and
  exec, so no other process or program can be started to get around any of this.
- **A memory bound the kernel enforces.** RLIMIT_DATA = `memory_mb`: an allocation past it fails, the run ends
  with EvaluationMemoryError, and the worker is replaced so that the next program starts clean.
- **A hard deadline.** The worker stops its own program at the deadline (the cheap path: it stays alive). If
  no answer comes `kill_grace_s` later (a program that swallows the stop, a long native call), the worker is
  killed with SIGKILL and restarted on the next call; the caller gets EvaluationTimeout either way.
- **No credentials.** The worker's environment holds only what Python and the BLAS need (`child`).

Where the layers hold: seccomp on x86_64 Linux; the namespaces and the chroot wherever this user may create a
user namespace. `PythonSandbox.layers` says which a worker got. The worker starts on first use and lives until
`close()`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from coco_sql.child import ChildDied, ChildProcess
from coco_sql.errors import EvaluationError, EvaluationMemoryError, EvaluationTimeout
from coco_sql.sandbox.python_worker import Init
from coco_sql.sandbox.supervisor import SupervisedSandbox, Supervisor, handshake, over_time

__all__ = ["HarnessResult", "PythonSandbox", "PythonSandboxLimits"]


@dataclass(frozen=True)
class PythonSandboxLimits:
    """Per-worker limits and the isolation layers to apply (both layers are on unless a test turns one off)."""

    memory_mb: int = 1024  # RLIMIT_DATA: heap and every private writable mapping
    kill_grace_s: float = 1.0  # after the deadline, how long the worker has to answer before SIGKILL
    max_open_files: int = 16
    cpu_cap_s: int = 600  # RLIMIT_CPU of one worker's lifetime; it is replaced before a run could reach it
    namespaces: bool = True
    seccomp: bool = True


@dataclass(frozen=True)
class HarnessResult:
    """One program over one split: the instances the harness finished, one-line reasons for the others."""

    outputs: list[tuple[str, Any]]
    failures: list[tuple[str, str]]
    elapsed_ms: float


class PythonSandbox(SupervisedSandbox):
    """One split's instances and the task's harness, in a locked-down worker process.

    `run` executes one candidate module over every instance, or raises EvaluationTimeout past the deadline,
    EvaluationMemoryError past the memory bound and EvaluationError when the module as a whole fails (does not
    compile, raises while loading, lacks the entry function). Thread-safe: programs run one at a time.
    """

    def __init__(
        self,
        instances: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        harness: str,
        entry: str,
        modules: Sequence[str],
        limits: PythonSandboxLimits | None = None,
    ) -> None:
        self.limits = limits or PythonSandboxLimits()
        self._init = Init(
            instances=[(str(i), dict(instance)) for i, instance in instances],
            harness=harness,
            entry=entry,
            modules=tuple(modules),
            memory_bytes=self.limits.memory_mb * 2**20,
            max_open_files=self.limits.max_open_files,
            cpu_cap_s=self.limits.cpu_cap_s,
            namespaces=self.limits.namespaces,
            seccomp=self.limits.seccomp,
        )
        self._supervisor = Supervisor(self._start_worker)
        self._cpu_s = 0.0  # CPU time the current worker has used, as it last reported
        self.layers: dict[str, bool] = {}  # the kernel layers the current worker got (known once it started)

    def run(
        self, source: str, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> HarnessResult:
        """`on_timeout` runs at the deadline (the evaluator's cancel flag for AI calls, when there are any)."""
        with self._supervisor.lock:
            if self._supervisor.worker is not None and (
                self._cpu_s + deadline_s + self.limits.kill_grace_s + 5 > self.limits.cpu_cap_s
            ):
                self._supervisor.discard(kill=False)  # near its lifetime CPU cap: a fresh worker takes over
            worker = self._supervisor.ensure()
            timer = threading.Timer(deadline_s, on_timeout) if on_timeout is not None else None
            start = time.monotonic()
            hard_stop = start + deadline_s + self.limits.kill_grace_s
            if timer is not None:
                timer.start()
            try:
                worker.send(("run", source, deadline_s))
                message = worker.receive(until=hard_stop)
            except ChildDied as death:
                self._supervisor.discard(kill=False)
                if time.monotonic() - start >= deadline_s:
                    raise _over_time(deadline_s, "stopped") from None
                if "SIGKILL" in str(death):  # the kernel's out-of-memory killer
                    raise EvaluationMemoryError(f"the sandbox process was killed ({death})") from None
                raise EvaluationError(f"the sandbox process died ({death})") from None
            finally:
                if timer is not None:
                    timer.cancel()
            if message is None:  # no answer within the grace period: stop it for good
                self._supervisor.discard(kill=True)
                raise _over_time(deadline_s, "killed")
            self._cpu_s = message[-1]
            if message[0] == "error":
                _, kind, text, _ = message
                if kind == "timeout":
                    raise _over_time(deadline_s, "stopped")
                if kind == "memory":  # a worker that hit its bound is replaced: the next program starts clean
                    self._supervisor.discard(kill=True)
                    raise EvaluationMemoryError(f"{text} (sandbox memory bound {self.limits.memory_mb} MB)")
                raise EvaluationError(text)
            if (
                time.monotonic() - start > deadline_s
            ):  # finished after the deadline: over time, for determinism
                raise _over_time(deadline_s, "stopped")
            _, outputs, failures, elapsed_ms, _ = message
            return HarnessResult(outputs, failures, elapsed_ms)

    # -- internals -------------------------------------------------------------------------------------------
    def _start_worker(self) -> ChildProcess:
        worker = ChildProcess.start("coco_sql.sandbox.python_worker")
        _, layers = handshake(worker, ("init", asdict(self._init)), "the Python sandbox")
        self.layers, self._cpu_s = dict(layers), 0.0
        return worker


def _over_time(deadline_s: float, how: str) -> EvaluationTimeout:
    return over_time("the program", deadline_s, how)
