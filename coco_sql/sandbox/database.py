"""The sandbox every candidate, probe and draft test runs in: one split's rows in a worker process with hard limits.

What it guarantees, and how (each claim has a test in tests/test_sandbox.py):

- **Only the split's rows.** The worker's in-memory DuckDB holds one split as the table `input`; no other split's
  rows exist in that process (`sandbox.lockdown`).
- **No files.** DuckDB's external access is off and locked, its temp directory is emptied (DuckDB otherwise
  allows reading `./.tmp`), the worker's working directory is a fresh empty folder, and RLIMIT_FSIZE = 0.
- **A memory bound the kernel enforces.** RLIMIT_DATA = `memory_mb` in the worker (DuckDB's `memory_limit` sits
  at three quarters of it); a query past it fails with EvaluationMemoryError, and the worker is replaced (so a
  query's outcome never depends on what an earlier one left fragmented). A worker that dies of it is reported
  the same way.
- **A hard deadline, in CPU time.** The worker interrupts its own query once it has spent the deadline in CPU
  (the cheap path: it stays alive). If it has spent `kill_grace_s` more CPU without answering (a long scalar
  call the interrupt cannot stop, a Python UDF, a stuck allocation), the parent, which reads the worker's CPU
  time from the kernel, kills it with SIGKILL, and it is restarted on the next call; the caller gets
  EvaluationTimeout either way. Wall time only backs this up (`lockdown.WALL_FACTOR`), so the outcome of a query
  does not depend on the machine's load.
- **No credentials.** The worker's environment holds only what Python and the BLAS need; AI calls are answered
  by the parent's AI runtime through the pipe, so keys, caches and the cost ledger never enter the worker.
- **Plain data back.** What the worker sends is parsed as hostile data (`messages.SQL_WORKER`: JSON frames,
  size-limited, each message checked against its type); a worker that sends anything else is stopped and the
  query fails with one line. Nothing it sends is unpickled or evaluated.

The worker starts on first use, forked from this process's template of it (`sandbox.fork_server`: the imports
are done once; 60 ms of the worker's CPU against 475 ms from scratch, `bench/bench_worker_start.py`), and lives
until `close()`. `bench/bench_sandbox.py` measures what the isolation costs per evaluation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from coco_sql.child import ChildDied, ChildMisbehaved, ChildProcess
from coco_sql.errors import EvaluationError, EvaluationMemoryError, EvaluationTimeout
from coco_sql.messages import SQL_WORKER, result_rows
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.sandbox.ai_pipe import AiServer, receive_answer
from coco_sql.sandbox.fork_server import template
from coco_sql.sandbox.lockdown import WALL_FACTOR, QueryResult
from coco_sql.sandbox.supervisor import (
    START_TIMEOUT_S,
    SupervisedSandbox,
    Supervisor,
    handshake,
    over_time,
    receive_within_cpu,
)
from coco_sql.sandbox.table_frames import table_bytes
from coco_sql.wire import WireError

# The worker's Arrow tables come from the C library's allocator, not pyarrow's own pool: that pool reserved about
# 900 MB of the worker's data segment once a table was read (measured in /proc: VmData 1.30 GB of a 1.34 GB
# RLIMIT_DATA, so DuckDB's first 64 MB block failed), unless pandas had been imported first. With it, the memory
# bound holds what the query uses (VmData 254 MB at rest), and the worker need not import pandas (0.6 s of CPU
# per start; a suite run starts about a thousand workers).
WORKER_SETTINGS = {"ARROW_DEFAULT_MEMORY_POOL": "system"}
CPU_POLL_S = 0.1  # how often the parent reads a busy worker's CPU time (the kill's resolution)

if TYPE_CHECKING:
    from coco_sql.core.ai_table import LocalFunctions

__all__ = ["QueryResult", "Sandbox", "SandboxLimits"]


@dataclass(frozen=True)
class SandboxLimits:
    """Per-worker limits. `memory_mb` is the kernel's bound on the worker's data (heap and private mappings)."""

    memory_mb: int = 1280
    kill_grace_s: float = 1.0  # after the deadline, how long the worker has to answer before SIGKILL

    @property
    def duckdb_memory_limit(self) -> str:
        return f"{self.memory_mb * 3 // 4}MB"


class Sandbox(SupervisedSandbox):
    """One split's rows, queried in a locked-down DuckDB inside a worker process with kernel-enforced limits.

    `run` executes one query and returns all rows, or raises EvaluationTimeout past the deadline,
    EvaluationMemoryError past the memory bound, and EvaluationError for any other failure (a worker that breaks
    its protocol among them: it is stopped). The sandbox stays usable after each (a killed worker is replaced on
    the next call). Thread-safe: queries run one at a time.
    """

    dialect = SANDBOX_DIALECT  # a `languages.base.QueryEngine` that runs probes as they are written

    def __init__(
        self,
        inputs: pd.DataFrame,
        *,
        relation: str = "input",
        limits: SandboxLimits | None = None,
        ai: LocalFunctions | None = None,
        tables: Mapping[str, pd.DataFrame] | None = None,
    ) -> None:
        """`tables`: read-only reference tables beside `relation` (name -> rows), e.g. the training rows as
        `examples` (`tasks.references`)."""
        self.relation = relation
        self.limits = limits or SandboxLimits()
        named = {relation: inputs, **dict(tables or {})}
        self._init = {
            "type": "init",
            "tables": list(named),
            "memory_bytes": self.limits.memory_mb * 2**20,
            "duckdb_memory_limit": self.limits.duckdb_memory_limit,
            "with_ai": ai is not None,
        }
        # Arrow IPC for the worker, once (`table_frames`: plain data, typed as DuckDB types the frame)
        self._tables = [table_bytes(rows) for rows in named.values()]
        self._ai = AiServer(ai)
        self._supervisor = Supervisor(self._start_worker)

    def _answer(self, worker: ChildProcess, cpu_s: float, hard_stop: float) -> dict[str, Any] | None:
        """The worker's answer (its AI calls served meanwhile), or None once it has spent `cpu_s` seconds of CPU
        on the query without one, or `hard_stop` passes (`supervisor.receive_within_cpu`)."""
        return receive_within_cpu(worker, cpu_s, hard_stop, poll_s=CPU_POLL_S,
                                  receive=lambda until: receive_answer(worker, until, self._ai))  # fmt: skip

    def run(self, sql: str, deadline_s: float, on_timeout: Callable[[], None] | None = None) -> QueryResult:
        """`on_timeout` runs at the deadline: the AI functions' cancel flag is set there, so that an AI call the
        query is waiting for stops too."""
        with self._supervisor.lock:
            worker = self._supervisor.ensure()
            timed_out = threading.Event()

            def _at_deadline() -> None:
                timed_out.set()
                if on_timeout is not None:
                    on_timeout()

            # The worker stops the query at `deadline_s` of its CPU time (`lockdown`); the parent's clock only
            # backs that up, at the worker's own wall-time backstop.
            wall_s = deadline_s * WALL_FACTOR
            timer = threading.Timer(wall_s, _at_deadline)
            hard_stop = time.monotonic() + wall_s + self.limits.kill_grace_s
            timer.start()
            try:
                worker.send({"type": "run", "sql": sql, "deadline_s": deadline_s})
                message = self._answer(worker, deadline_s + self.limits.kill_grace_s, hard_stop)
                if message is None:  # no answer within the grace period: stop it for good
                    self._supervisor.discard(kill=True)
                    raise _over_time(deadline_s, "killed")
                if message["type"] == "result":
                    rows = result_rows(message)
                elif message["type"] != "error":
                    raise WireError(f"the sandbox process answered a query with {message['type']!r}")
            except ChildDied as death:
                self._supervisor.discard(kill=False)
                if timed_out.is_set():
                    raise _over_time(deadline_s, "stopped") from None
                raise EvaluationMemoryError(
                    f"the sandbox process died ({death}): the query exceeded the sandbox's memory bound of "
                    f"{self.limits.memory_mb} MB or crashed the engine"
                ) from None
            except (ChildMisbehaved, WireError) as error:
                raise self._misbehaved(error) from None
            finally:
                timer.cancel()
            if message["type"] == "error":
                if message["kind"] == "timeout" or timed_out.is_set():
                    raise _over_time(deadline_s, "stopped")
                if message["kind"] == "memory":
                    self._supervisor.discard(kill=True)  # replaced: the next query starts clean
                    raise EvaluationMemoryError(
                        f"{message['message']} (sandbox memory bound {self.limits.memory_mb} MB)"
                    )
                raise EvaluationError(message["message"])
            if timed_out.is_set():  # finished in the instant the deadline passed: over time, for determinism
                raise _over_time(deadline_s, "stopped")
            return QueryResult(tuple(message["columns"]), rows, message["elapsed_ms"])

    def statement_types(self, sql: str) -> list[str]:
        """DuckDB's own reading of the statement types (a cheap second check after the validator). Raises
        EvaluationError when DuckDB cannot parse the text."""
        with self._supervisor.lock:
            worker = self._supervisor.ensure()
            try:
                worker.send({"type": "types", "sql": sql})
                message = worker.receive(until=time.monotonic() + START_TIMEOUT_S)
                if message is not None and message["type"] not in ("types", "error"):
                    raise WireError(f"the sandbox process answered a parse request with {message['type']!r}")
            except ChildDied as death:
                self._supervisor.discard(kill=False)
                raise EvaluationError(f"the sandbox process died while parsing ({death})") from None
            except (ChildMisbehaved, WireError) as error:
                raise self._misbehaved(error) from None
            if message is None:
                self._supervisor.discard(kill=True)
                raise EvaluationError("the sandbox process did not answer a parse request")
            if message["type"] == "error":
                raise EvaluationError(message["message"])
            return list(message["kinds"])

    # -- internals -------------------------------------------------------------------------------------------
    def _misbehaved(self, error: Exception) -> EvaluationError:
        """A worker that broke the protocol is stopped; the query fails with what it sent (one line)."""
        self._supervisor.discard(kill=True)
        return EvaluationError(f"{error} (the sandbox process was stopped)")

    def _start_worker(self) -> ChildProcess:
        # forked from this process's template of the worker (which has pandas too when the split has AI calls)
        preload = ("pandas",) if self._init["with_ai"] else ()
        worker = template("coco_sql.sandbox.worker", preload, WORKER_SETTINGS).start(SQL_WORKER)
        handshake(worker, self._init, "the sandbox process", blobs=self._tables)
        return worker


def _over_time(deadline_s: float, how: str) -> EvaluationTimeout:
    return over_time("query", deadline_s, how)
