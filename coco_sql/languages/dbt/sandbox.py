"""The dbt sandbox: one split's source tables and a warm dbt in a locked-down worker process (`worker`).

What it guarantees, and how (tests/test_dbt_sandbox.py checks each, every hostile program once per kernel layer
alone next to a control run without it that shows the program succeeding):

- **Only the split's sources.** The worker holds one split's copy of the source tables; each run gets a fresh
  in-memory DuckDB holding them (the plugin, `inputs`), locked down like the SQL sandbox's, and dropped when the
  run ends, so nothing of one evaluation is visible to the next.
- **No files, no network, no processes**, even for code that gets past the validator, dbt's Jinja sandbox and
  DuckDB's lock-down (the tests use a dbt Python model, which the validator never lets through): the jail and
  Landlock leave only the standard library, site-packages and coco_sql readable and a bounded tmpfs writable;
  the network namespace, Landlock and seccomp each refuse a TCP connection; seccomp refuses fork and exec.
- **A hard deadline.** Validation (the Jinja render) and runs happen in the worker. At the deadline the worker
  interrupts DuckDB itself (the cheap path: it stays warm); if no answer comes `kill_grace_s` later (a Jinja
  loop, a stuck model) it is killed with SIGKILL and a new one starts on the next call. A memory error or a
  crash replaces it too. The caller gets EvaluationTimeout / EvaluationMemoryError / EvaluationError.
- **Plain data back, scored here.** The worker answers with JSON frames checked against `messages.DBT_WORKER`
  (a run form's files, each target's rows by column, test outcomes); a malformed answer stops it and fails the
  call with one line. It never sees expected rows: the caller scores the rows (`compare`).
- **AI through the pipe.** AI functions in models call the parent's AI runtime (`sandbox.ai_pipe`), as the SQL
  sandbox's do; no key, model or cache enters the worker.

`layers` says which kernel layers the current worker got (namespaces, jail, landlock, seccomp). Start-up costs
one warm-up run. A worker forked from its template (`sandbox.fork_server`) has dbt imported, its caches warm and
the warm-up project's parse saved: 0.6 s of CPU against 5.5 s from scratch on a 2-core machine
(`bench/bench_worker_start.py`). A warm run takes 1-2 s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from coco_sql.child import ChildDied, ChildMisbehaved, ChildProcess
from coco_sql.errors import CandidateRejected, EvaluationError, EvaluationMemoryError
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.runner import DbtRunResult, TestOutcome
from coco_sql.languages.dbt.validate import DbtSpec
from coco_sql.messages import DBT_WORKER, result_rows
from coco_sql.sandbox.ai_pipe import AiServer, receive_answer
from coco_sql.sandbox.fork_server import template
from coco_sql.sandbox.supervisor import SupervisedSandbox, Supervisor, handshake, over_time
from coco_sql.sandbox.table_frames import table_bytes
from coco_sql.wire import WireError

if TYPE_CHECKING:
    from coco_sql.core.ai_table import LocalFunctions

__all__ = ["DbtSandbox", "DbtSandboxLimits"]

# pyarrow's allocator starts a background thread when imported; the worker must be single-threaded until its
# namespaces are entered (the kernel refuses a new user namespace to a threaded process)
WORKER_ENV = {"JE_ARROW_MALLOC_CONF": "background_thread:false"}


@dataclass(frozen=True)
class DbtSandboxLimits:
    """Per-worker limits and the kernel layers to apply (all on unless a test turns one off)."""

    memory_mb: int = 2048  # RLIMIT_DATA: dbt itself takes ~350 MB, thread stacks count too
    duckdb_memory_mb: int = 1024
    work_mb: int = 64  # the work folder's tmpfs (jaffle_shop: 0.9 MB of compiled SQL and parse state)
    max_file_mb: int = 16  # RLIMIT_FSIZE (dbt's partial-parse file is the largest: 0.6 MB for jaffle_shop)
    max_open_files: int = 256
    kill_grace_s: float = 2.0  # after the deadline, how long the worker has to answer before SIGKILL
    namespaces: bool = True
    jail: bool = True
    landlock: bool = True
    seccomp: bool = True


class DbtSandbox(SupervisedSandbox):
    """One split's source tables (``"source.table"`` -> DataFrame) and a warm dbt in a locked-down worker.

    `validate` renders and checks a project there and returns its run form; `run` runs a run form and returns
    the targets' rows. Both raise EvaluationTimeout past the deadline, EvaluationMemoryError past the memory
    bound and EvaluationError for any other failure (a worker that breaks its protocol among them: it is
    stopped); the sandbox stays usable after each. Thread-safe: requests run one at a time.
    """

    def __init__(
        self,
        sources: Mapping[str, pd.DataFrame],
        *,
        limits: DbtSandboxLimits | None = None,
        ai: LocalFunctions | None = None,
    ) -> None:
        self.limits = limits or DbtSandboxLimits()
        lim = self.limits
        self._init = {
            "type": "init",
            "tables": list(sources),
            "memory_bytes": lim.memory_mb * 2**20,
            "duckdb_memory_limit": f"{lim.duckdb_memory_mb}MB",
            "work_bytes": lim.work_mb * 2**20,
            "max_file_bytes": lim.max_file_mb * 2**20,
            "max_open_files": lim.max_open_files,
            "with_ai": ai is not None,
            "layers": {"namespaces": lim.namespaces, "jail": lim.jail, "landlock": lim.landlock,
                       "seccomp": lim.seccomp},
        }  # fmt: skip
        self._tables = [table_bytes(rows) for rows in sources.values()]  # Arrow IPC (`sandbox.table_frames`)
        self._ai = AiServer(ai)
        self.with_ai = ai is not None  # the worker registers the AI UDFs only then
        self._supervisor = Supervisor(self._start_worker)
        self.layers: dict[str, bool] = {}  # the kernel layers the current worker got (known once it started)

    def validate(self, program: DbtProject | str, spec: DbtSpec, deadline_s: float) -> DbtProject:
        """The project's run form (`validate.ValidatedProject.run_files`), rendered and checked in the worker;
        CandidateRejected (one line) when a check fails."""
        text = program.to_text() if isinstance(program, DbtProject) else program
        request = {"type": "validate", "project": text, "spec": spec.as_message(), "deadline_s": deadline_s}
        message = self._exchange(request, deadline_s, ("validated", "rejected"), "the validation")
        if message["type"] == "rejected":
            raise CandidateRejected(message["message"])
        try:
            return DbtProject.of(dict(message["files"]))
        except CandidateRejected as error:
            self._supervisor.discard(kill=True)
            raise EvaluationError(f"the dbt sandbox process sent a bad run form ({error})") from None

    def run(
        self,
        run_form: DbtProject | Mapping[str, str],
        targets: Sequence[str],
        deadline_s: float,
        *,
        tests: bool = True,
        on_timeout: Callable[[], None] | None = None,
    ) -> DbtRunResult:
        """Run a run form over the split's sources; each target's rows as a DataFrame, the data tests'
        outcomes, one line per failed model. `on_timeout` runs at the deadline (the AI runtime's cancel flag)."""
        files = run_form.files if isinstance(run_form, DbtProject) else run_form
        request = {"type": "run", "files": sorted(files.items()), "targets": list(targets), "tests": tests,
                   "deadline_s": deadline_s}  # fmt: skip
        message = self._exchange(request, deadline_s, ("result",), "the dbt run", on_timeout)
        try:
            models = {name: _frame(table) for name, table in message["models"]}
        except WireError as error:
            self._supervisor.discard(kill=True)
            raise EvaluationError(f"{error} (the dbt sandbox process was stopped)") from None
        tests_run = tuple(TestOutcome(**outcome) for outcome in message["tests"])
        return DbtRunResult(models, tests_run, dict(message["errors"]), dict(message["timings"]))

    # -- internals -------------------------------------------------------------------------------------------
    def _exchange(
        self,
        request: dict[str, Any],
        deadline_s: float,
        answers: tuple[str, ...],
        what: str,
        on_timeout: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Send one request and read its answer (serving AI chunks on the way) under the hard deadline."""
        with self._supervisor.lock:
            worker = self._supervisor.ensure()
            timer = threading.Timer(deadline_s, on_timeout) if on_timeout is not None else None
            start = time.monotonic()
            if timer is not None:
                timer.start()
            try:
                worker.send(request)
                message = receive_answer(worker, start + deadline_s + self.limits.kill_grace_s, self._ai)
                if message is not None and message["type"] not in (*answers, "error"):
                    raise WireError(f"the dbt sandbox process answered {what} with {message['type']!r}")
            except ChildDied as death:
                self._supervisor.discard(kill=False)
                if time.monotonic() - start >= deadline_s:
                    raise over_time(what, deadline_s, "stopped") from None
                raise EvaluationMemoryError(
                    f"the dbt sandbox process died ({death}): {what} exceeded the memory bound of "
                    f"{self.limits.memory_mb} MB or crashed the engine"
                ) from None
            except (ChildMisbehaved, WireError) as error:
                self._supervisor.discard(kill=True)
                raise EvaluationError(f"{error} (the dbt sandbox process was stopped)") from None
            finally:
                if timer is not None:
                    timer.cancel()
            if message is None:  # no answer within the grace period: stop it for good
                self._supervisor.discard(kill=True)
                raise over_time(what, deadline_s, "killed")
            if message["type"] == "error":
                if message["kind"] == "timeout":
                    raise over_time(what, deadline_s, "stopped")
                if message["kind"] == "memory":
                    self._supervisor.discard(kill=True)  # replaced: the next request starts clean
                    bound = f"memory bound {self.limits.memory_mb} MB"
                    raise EvaluationMemoryError(f"{message['message']} ({bound})")
                raise EvaluationError(message["message"])
            if (
                time.monotonic() - start > deadline_s
            ):  # answered after the deadline: over time, for determinism
                raise over_time(what, deadline_s, "stopped")
            return message

    def _start_worker(self) -> ChildProcess:
        # forked from this process's template of the worker, which has imported dbt once for all its forks
        worker = template("coco_sql.languages.dbt.worker", (), WORKER_ENV).start(DBT_WORKER)
        ready = handshake(worker, self._init, "the dbt sandbox", blobs=self._tables)
        self.layers = dict(ready["layers"])
        return worker


def _frame(table: dict[str, Any]) -> pd.DataFrame:
    """A target's rows, checked (`result_rows`), as a DataFrame of the values DuckDB returned."""
    return pd.DataFrame.from_records(result_rows(table), columns=table["columns"])
