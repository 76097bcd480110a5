"""The sandbox every Python candidate runs in: one split's instances in a zygote that forks a process per program.

What it blocks, and how (the worker's side, layer by layer, is `sandbox.python_worker`). Every claim has a test
in tests/test_python_language.py or tests/test_python_hostile.py whose program gets past the validator and the
restricted builtins (it walks `object.__subclasses__()` to the real `open`, `__import__`, `os` and socket
class), once per kernel layer alone, next to a control run without the kernel layers that shows the same
program succeeding:

- **No other split.** The worker receives one split's instances (inputs only, never the expected values), so
  no other split exists in its memory; and no file can be opened once a program runs (seccomp refuses every
  open; the chroot layer leaves nothing to open), so neither the pack's data files nor /proc (the parent's
  memory) can be read.
- **No network.** seccomp refuses to create a socket; the network namespace has only a loopback interface
  that is down, so not even 127.0.0.1 of the machine is reachable; the socket constructors raise in-process.
- **No file writes.** RLIMIT_FSIZE = 0; seccomp refuses to open, create, truncate, rename, link or delete a
  file; with the chroot layer nothing but an empty folder is visible. The program's seccomp filter also
  refuses fork, clone, exec and signals, so no other process or program can be started or touched.
- **Nothing left for the next program.** Each program runs in a process forked from the zygote for it alone,
  which exits after its one answer: what it changed (module attributes, numpy's error state, a library class,
  the harness's globals) ends with it.
- **Plain data back, and no way to coco-sql's process.** The program's process closes every descriptor but its
  own answer pipe (coco-sql's pipes to the zygote among them) and no descriptor number is in any argv. The
  zygote reads its answer as hostile data (`messages.PYTHON_CANDIDATE`: a size-limited JSON frame, checked
  against its schema), and this process checks it again (`messages.PYTHON_ZYGOTE`); a malformed answer fails
  the run with one line. Nothing is unpickled or evaluated.
- **Scored outside.** The sandbox returns what the harness answered; the language turns it into outputs with
  the pack's trusted code in this process (`languages.python`), and the evaluator scores them here.
- **A memory bound the kernel enforces.** RLIMIT_DATA = `memory_mb`: an allocation past it fails, the run ends
  with EvaluationMemoryError, and that program's process is gone with it.
- **A hard deadline.** The program's process stops its own program at the deadline (SIGALRM). If no answer
  comes `kill_grace_s` later (a program that swallows the stop, a long native call), the zygote kills it with
  SIGKILL; the caller gets EvaluationTimeout either way. Should the zygote itself not answer, this process
  kills it too and starts a new one on the next call.
- **No credentials.** The worker's environment holds only what Python and the BLAS need (`child`).

Where the layers hold: seccomp on x86_64 Linux; the namespaces and the chroot wherever this user may create a
user namespace. `PythonSandbox.layers` says which the zygote got. The zygote starts on first use and lives until
`close()`; it forks each program's process ahead of time, so that forking is not on the evaluation's path
(`bench/bench_sandbox.py` measures what a fresh process per program costs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coco_sql.child import ChildDied, ChildMisbehaved, ChildProcess
from coco_sql.errors import EvaluationError, EvaluationMemoryError, EvaluationTimeout
from coco_sql.messages import PYTHON_ANSWER_MAX_BYTES, PYTHON_ZYGOTE
from coco_sql.sandbox.supervisor import SupervisedSandbox, Supervisor, handshake, over_time
from coco_sql.wire import exact

__all__ = ["HarnessResult", "PythonSandbox", "PythonSandboxLimits"]

ZYGOTE_MARGIN_S = 2.0  # past the candidate's deadline and grace, how long the zygote has to report it


@dataclass(frozen=True)
class PythonSandboxLimits:
    """Per-worker limits and the isolation layers to apply (both layers are on unless a test turns one off)."""

    memory_mb: int = 1024  # RLIMIT_DATA: heap and every private writable mapping
    kill_grace_s: float = 1.0  # after the deadline, how long the program has to answer before SIGKILL
    max_open_files: int = 16
    cpu_cap_s: int = 600  # RLIMIT_CPU of one candidate's process
    max_answer_mb: int = PYTHON_ANSWER_MAX_BYTES // 2**20  # one program's outputs over the split
    namespaces: bool = True
    seccomp: bool = True


@dataclass(frozen=True)
class HarnessResult:
    """One program over one split: the instances the harness finished, one-line reasons for the others."""

    outputs: list[tuple[str, Any]]
    failures: list[tuple[str, str]]
    elapsed_ms: float


class PythonSandbox(SupervisedSandbox):
    """One split's instances and the task's harness, in a locked-down zygote that forks a process per program.

    `run` executes one candidate module over every instance, or raises EvaluationTimeout past the deadline,
    EvaluationMemoryError past the memory bound and EvaluationError when the module as a whole fails (does not
    compile, raises while loading, lacks the entry function, its process crashes or breaks its protocol).
    `restarts` counts the programs whose process ended that way (killed, out of memory, crashed, malformed
    answer) and zygotes replaced. Thread-safe: programs run one at a time.
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
        self._init = {
            "type": "init",
            "instances": [(str(i), exact(dict(instance))) for i, instance in instances],
            "harness": harness,
            "entry": entry,
            "modules": list(modules),
            "memory_bytes": self.limits.memory_mb * 2**20,
            "max_open_files": self.limits.max_open_files,
            "cpu_cap_s": self.limits.cpu_cap_s,
            "namespaces": self.limits.namespaces,
            "seccomp": self.limits.seccomp,
            "max_answer_bytes": min(self.limits.max_answer_mb * 2**20, PYTHON_ANSWER_MAX_BYTES),
            "kill_grace_s": self.limits.kill_grace_s,
        }
        self._supervisor = Supervisor(self._start_worker)
        self.layers: dict[str, bool] = {}  # the kernel layers the current zygote got (known once it started)

    def run(
        self, source: str, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> HarnessResult:
        """`on_timeout` runs at the deadline (the evaluator's cancel flag for AI calls, when there are any)."""
        with self._supervisor.lock:
            worker = self._supervisor.ensure()
            timer = threading.Timer(deadline_s, on_timeout) if on_timeout is not None else None
            start = time.monotonic()
            hard_stop = start + deadline_s + self.limits.kill_grace_s + ZYGOTE_MARGIN_S
            if timer is not None:
                timer.start()
            try:
                worker.send({"type": "run", "source": source, "deadline_s": deadline_s})
                message = worker.receive(until=hard_stop)
                if message is not None and message["type"] == "ready":
                    raise ChildMisbehaved("the Python sandbox process answered a program with 'ready'")
            except ChildDied as death:
                self._supervisor.discard(kill=False)
                if time.monotonic() - start >= deadline_s:
                    raise _over_time(deadline_s, "stopped") from None
                raise EvaluationError(f"the sandbox process died ({death})") from None
            except ChildMisbehaved as error:
                self._supervisor.discard(kill=True)
                raise EvaluationError(f"{error} (the Python sandbox process was stopped)") from None
            finally:
                if timer is not None:
                    timer.cancel()
            if message is None:  # the zygote did not answer: stop it for good
                self._supervisor.discard(kill=True)
                raise _over_time(deadline_s, "killed")
            if message["type"] == "error":
                raise self._failure(message["kind"], message["message"], deadline_s, start)
            if (
                time.monotonic() - start > deadline_s
            ):  # finished after the deadline: over time, for determinism
                raise _over_time(deadline_s, "stopped")
            return HarnessResult(
                [tuple(output) for output in message["outputs"]],
                [tuple(failure) for failure in message["failures"]],
                message["elapsed_ms"],
            )

    # -- internals -------------------------------------------------------------------------------------------
    def _failure(self, kind: str, text: str, deadline_s: float, start: float) -> EvaluationError:
        """The error for a program's `error` answer; a process that ended abnormally counts as a restart."""
        if kind == "timeout":
            return _over_time(deadline_s, "stopped")
        if kind == "error":
            return EvaluationError(text)
        self._supervisor.replaced()  # its process was killed or died: the next program gets a fresh one
        if kind == "killed":
            return _over_time(deadline_s, "killed")
        if kind in ("memory", "crashed_memory"):
            return EvaluationMemoryError(f"{text} (sandbox memory bound {self.limits.memory_mb} MB)")
        if kind == "crashed" and time.monotonic() - start >= deadline_s:
            return _over_time(deadline_s, "stopped")
        return EvaluationError(text)

    def _start_worker(self) -> ChildProcess:
        worker = ChildProcess.start("coco_sql.sandbox.python_worker", receives=PYTHON_ZYGOTE)
        ready = handshake(worker, self._init, "the Python sandbox")
        self.layers = dict(ready["layers"])
        return worker


def _over_time(deadline_s: float, how: str) -> EvaluationTimeout:
    return over_time("the program", deadline_s, how)
