"""The dbt sandbox worker: one split's source tables and a warm dbt, in a process that locked itself down.

Started by `languages.dbt.sandbox.DbtSandbox`, forked from a template that imported dbt once (`preload`,
`sandbox.fork_server`), or as `python -m coco_sql.languages.dbt.worker` where no template can be had
(`child.ChildProcess`: pipes at descriptors 3 and 4, an empty temporary working directory, an environment
without credentials). It receives its init message and the split's tables (Arrow IPC streams,
`sandbox.table_frames`), imports dbt (a no-op in a fork), and then, still single-threaded, applies its layers in this order (each is applied by the process itself, binds
every thread it starts later, and cannot be lifted; `ready` reports which held):

1. **dbt's own surface, trimmed** (always): dbt's multiprocessing context, and that of its thread pools, is
   replaced by one whose locks are threading locks (dbt never starts a process with them; their semaphores
   would need /dev/shm, and dbt's spawn-context ones a resource-tracker process outside the sandbox, which
   unlinks whatever names it is sent when it exits); `platform.processor()` runs `uname -p` now,
   while exec is still possible; this folder leaves `sys.path`, and every top-level `dbt_*` module on it (dbt
   imports them all at each invocation) must be one of dbt's own packages, or the worker does not start.
2. **namespaces and jail** (`sandbox.confine.enter_jail`): new user, mount, network and IPC namespaces; the root
   becomes a tmpfs holding only the standard library, site-packages and coco_sql, read-only, and the work
   folder, a size-bounded tmpfs; all capabilities dropped. Without a jail, the user, network and IPC namespaces
   alone (`kernel_layers.enter_namespaces`), and the work folder is the temporary folder on disk.
3. **landlock** (`sandbox.confine.restrict_paths`): reads beneath the same folders, reads and writes beneath
   the work folder; TCP bind and connect, signals and abstract sockets outside refused.
4. **kernel limits**: RLIMIT_DATA (the memory bound), RLIMIT_FSIZE (a few MB: dbt's partial-parse file is the
   largest), RLIMIT_NOFILE, RLIMIT_CORE = 0.
5. **seccomp** (`kernel_layers.seccomp_program(..., threads=True)`): sockets, fork, exec, ptrace, signals to
   others, mounts, namespaces, setrlimit, creating links and changing file metadata refused; threads allowed;
   opens, mkdir, rmdir and unlink allowed (confined by 2 and 3).

Then one warm-up run of a built-in project (so the first evaluation does not pay dbt's adapter start, and a
layer that stops dbt fails the start, loudly; a fork's template ran it once already, and the fork's dbt takes
up the parse the template saved), and `ready`. Each request after that: `validate` renders and checks a
project (`validate.validate_project`: the Jinja render counts its own work, `jinja_sandbox`, and runs here all the
same, under the memory bound and the parent's SIGKILL) and answers its run form or the one-line rejection; `run` runs a run form on a
fresh in-memory DuckDB of the split's tables (`runner.DbtSession`) and answers each target's rows (plain data,
by column), the data tests' outcomes and one line per failed model. The worker never sees expected rows. At
the deadline it interrupts DuckDB (repeatedly: dbt goes on to the next model), the cheap path that keeps it
warm; the parent kills it with SIGKILL if that does not end the request.
"""

from __future__ import annotations

import os
import platform
import resource
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coco_sql.messages import DBT_PARENT, SQL_RESULT_MAX_BYTES
from coco_sql.sandbox.table_frames import table_from  # pyarrow, before the lock-down
from coco_sql.wire import Channel, child_end, dumps

if TYPE_CHECKING:
    from coco_sql.languages.dbt.runner import DbtSession

# what the dbt filter lets through of `kernel_layers.X86_64_DENIED`: open and openat (confined by the jail and
# Landlock), mkdir, rmdir, unlink, mkdirat, unlinkat (dbt's target/ folder and the run form's files), and
# socketpair (a connected pair inside this process, nothing to reach: dbt-duckdb starts an asyncio loop, whose
# self-pipe it is, before a Python model; the validator never lets one through, but a run form is not checked)
DBT_ALLOWED = frozenset({2, 257, 83, 84, 87, 258, 263, 53})
# what DuckDB reads when it opens a database (its CPU and memory quota: the cgroup files /proc/self/cgroup
# names): outside a jail they exist, and DuckDB fails when it may see a file but not open it
_DUCKDB_FOLDERS = ("/sys/fs/cgroup",)
_DUCKDB_FILES = ("/proc/self/cgroup", "/sys/devices/system/cpu/online")
# the one session of a worker, and its template's warm-up session, run under this token: the same profile, so
# the parse the template saved is one a fork's dbt takes up
WORKER_TOKEN = "worker"
PARTIAL_PARSE = "partial_parse.msgpack"  # where dbt saves a parse, in its target folder
# what the template's warm-up run saved of its parse (`preload`); each fork starts its session from it
_TEMPLATE_PARSE: dict[str, bytes] = {}
_WARM_FILES = {
    "dbt_project.yml": "name: warm_up\nconfig-version: 2\n",
    "models/sources.yml": "version: 2\nsources:\n  - name: warm\n    tables:\n      - name: rows\n",
    "models/schema.yml": "version: 2\nmodels:\n  - name: m\n    columns:\n      - name: id\n        tests: [not_null]\n",
    "models/m.sql": "select id from {{ source('warm', 'rows') }}\n",
}


class _ThreadContext:
    """What dbt (`dbt.mp_context`) and its thread pools ask of a multiprocessing context: locks, here threading
    ones, and a SimpleQueue built on them (a pipe: a pool's change notifier)."""

    Lock = staticmethod(threading.Lock)
    RLock = staticmethod(threading.RLock)

    def SimpleQueue(self) -> Any:  # multiprocessing's name
        from multiprocessing.queues import SimpleQueue

        return SimpleQueue(ctx=self)


def _thread_pool(pool: Any, processes: Any = None, initializer: Any = None, initargs: Any = ()) -> None:
    """`ThreadPool.__init__` with the context above (the default one's SimpleQueue takes two semaphores)."""
    from multiprocessing.pool import Pool

    Pool.__init__(pool, processes, initializer, initargs, context=_ThreadContext())


def trim_dbt(folder: str) -> None:
    """Layer 1 (see the module docstring): before anything imports dbt's manifest or adapters."""
    from multiprocessing.pool import ThreadPool

    import dbt.mp_context

    dbt.mp_context._MP_CONTEXT = _ThreadContext()  # type: ignore[assignment]
    ThreadPool.__init__ = _thread_pool  # type: ignore[method-assign]  (dbt's pools: this process's only ones)
    platform.processor()  # runs `uname -p` once; the answer is cached for the process's life
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != folder]
    cli = find_spec("dbt.cli")
    home = Path(cli.origin).parents[2] if cli is not None and cli.origin else None
    import pkgutil

    for module in pkgutil.iter_modules():
        where = getattr(module.module_finder, "path", None)
        if module.name.startswith("dbt_") and (where is None or Path(where) != home):
            raise RuntimeError(
                f"module {module.name} in {where} is on sys.path, and dbt imports every dbt_* module it finds: "
                "remove it (only dbt's own packages may have such names)"
            )
    import dbt.cli.main  # dbt's manifest and adapters, with the context above
    from dbt.plugins.manager import _get_dbt_modules

    _get_dbt_modules()  # dbt's imports of those modules, cached for the process's life


def read_only_folders() -> list[str]:
    """What the jail and Landlock leave readable: the standard library, site-packages, and coco_sql."""
    paths = sysconfig.get_paths()
    package = Path(__file__).resolve().parents[2]  # coco_sql/
    return sorted({paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"], str(package)})


def lock_down(init: Mapping[str, Any]) -> tuple[dict[str, bool], str]:
    """Layers 2 to 5; which held, and the work folder."""
    from coco_sql.sandbox.confine import JAIL_WORK, enter_jail, restrict_paths
    from coco_sql.sandbox.kernel_layers import enter_namespaces, install_seccomp

    wanted = init["layers"]
    folder = os.getcwd()
    readable = read_only_folders()
    jail = wanted["jail"] and enter_jail(readable, folder, init["work_bytes"])
    namespaces = jail or (wanted["namespaces"] and enter_namespaces())
    work = JAIL_WORK if jail else folder
    os.makedirs(os.path.join(work, "tmp"), exist_ok=True)
    os.environ["TMPDIR"] = os.path.join(work, "tmp")  # dbt-duckdb writes Python models there
    tempfile.tempdir = None
    landlock = wanted["landlock"] and restrict_paths([*readable, *_DUCKDB_FOLDERS], [work], _DUCKDB_FILES) > 0
    for kind, value in (
        (resource.RLIMIT_DATA, init["memory_bytes"]),
        (resource.RLIMIT_FSIZE, init["max_file_bytes"]),
        (resource.RLIMIT_NOFILE, init["max_open_files"]),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(kind, (value, value))
    seccomp = wanted["seccomp"] and install_seccomp(DBT_ALLOWED, threads=True)
    layers = {"namespaces": namespaces, "jail": jail, "landlock": landlock, "seccomp": seccomp}
    return layers, work


class Deadline:
    """At `deadline_s`, and every 0.1 s after it until cancelled, call `stop` (DuckDB's interrupt: dbt goes on
    to the next model, which must be stopped too)."""

    def __init__(self, deadline_s: float, stop: Callable[[], None]) -> None:
        self.fired = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._wait, args=(deadline_s, stop), daemon=True)
        self._thread.start()

    def _wait(self, deadline_s: float, stop: Callable[[], None]) -> None:
        if self._done.wait(deadline_s):
            return
        self.fired.set()
        while not self._done.is_set():
            stop()
            self._done.wait(0.1)

    def cancel(self) -> None:
        self._done.set()
        self._thread.join()


class Worker:
    """The split's tables and a warm `DbtSession`; answers validate and run requests."""

    def __init__(self, channel: Channel, init: Mapping[str, Any], tables: dict[str, Any], work: str) -> None:
        from coco_sql.languages.dbt.runner import DbtSession

        self.channel = channel
        self.tables = tables
        self.with_ai = init["with_ai"]
        self.session = DbtSession(
            Path(work) / "dbt", memory_limit=init["duckdb_memory_limit"], token=WORKER_TOKEN
        )
        saved = _TEMPLATE_PARSE.get(PARTIAL_PARSE)
        if saved is not None:  # forked: the warm-up re-reads the template's parse of the same project
            target = self.session.workdir / "target"
            target.mkdir(parents=True, exist_ok=True)
            (target / PARTIAL_PARSE).write_bytes(saved)

    def validate(self, message: Mapping[str, Any]) -> dict[str, Any]:
        from coco_sql.errors import CandidateRejected
        from coco_sql.languages.dbt.runner import PROFILE
        from coco_sql.languages.dbt.validate import DbtSpec, validate_project

        spec = DbtSpec.from_message(message["spec"])
        try:
            validated = validate_project(message["project"], spec)
        except CandidateRejected as error:
            return {"type": "rejected", "message": str(error)}
        return {"type": "validated", "files": sorted(validated.run_files(PROFILE).items())}

    def run(self, message: Mapping[str, Any]) -> dict[str, Any]:
        from coco_sql.plugin_loader import local_ai
        from coco_sql.sandbox.ai_pipe import ask_parent

        ask = ask_parent(self.channel)
        deadline = Deadline(message["deadline_s"], self.session.interrupt)
        try:
            result = self.session.run_files(
                dict(message["files"]),
                self.tables,
                message["targets"],
                register_udfs=(lambda con: local_ai().register(con, ask)) if self.with_ai else None,
                tests=message["tests"],
                read=_read_rows,
            )
        finally:
            deadline.cancel()
        if deadline.fired.is_set():
            return _error("timeout", f"the dbt run exceeded its {message['deadline_s']:g} s deadline")
        return {
            "type": "result",
            "models": [(name, _table(rows)) for name, rows in result.models.items()],
            "tests": [_outcome(test) for test in result.tests],
            "errors": sorted(result.errors.items()),
            "timings": sorted(result.timings.items()),
        }

    def answer(self, message: Mapping[str, Any]) -> bytes:
        """The frame answering one request; every failure is the candidate's, as one line."""
        from coco_sql.errors import EvaluationError, EvaluationTimeout

        try:
            reply = self.validate(message) if message["type"] == "validate" else self.run(message)
            payload = dumps(reply)
        except EvaluationTimeout as error:
            return dumps(_error("timeout", str(error)))
        except MemoryError:
            return dumps(_error("memory", "the dbt run does not fit in the sandbox's memory bound"))
        except EvaluationError as error:
            return dumps(_error("error", str(error)))
        except Exception as error:
            return dumps(_error("error", f"dbt failed: {type(error).__name__}: {error}"))
        if len(payload) > SQL_RESULT_MAX_BYTES:
            size = f"{len(payload) / 2**20:,.0f} MB"
            limit = f"{SQL_RESULT_MAX_BYTES // 2**20} MB"
            return dumps(_error("error", f"the targets' rows are {size}, over the limit of {limit}"))
        return payload


def warm_up(session: DbtSession) -> None:
    """One run of a built-in project through the validator and dbt in `session` (a `runner.DbtSession`); fails
    loudly (in a worker: a layer that stops dbt)."""
    import pandas as pd

    from coco_sql.languages.dbt.project import DbtProject
    from coco_sql.languages.dbt.validate import validate_project

    validated = validate_project(DbtProject.of(_WARM_FILES))
    result = session.run(validated, {"warm.rows": pd.DataFrame({"id": [1, 2]})}, ["m"])
    if result.errors or result.tests_passed != 1:
        raise RuntimeError(f"the warm-up run failed: {result.errors} {result.tests}")


def _read_rows(connection: Any, sql: str) -> Any:
    """A target's rows as `QueryResult` (DuckDB's own values and types: `sandbox.worker.result_message`)."""
    from coco_sql.sandbox.lockdown import QueryResult

    cursor = connection.execute(sql)
    rows = cursor.fetchall()
    description = cursor.description or ()
    return QueryResult(tuple(d[0] for d in description), rows, 0.0, tuple(str(d[1]) for d in description))


def _table(rows: Any) -> dict[str, Any]:
    from coco_sql.sandbox.worker import result_message

    message = result_message(rows)
    return {"columns": message["columns"], "n_rows": message["n_rows"], "data": message["data"]}


def _outcome(test: Any) -> dict[str, Any]:
    status = test.status if test.status in ("pass", "fail", "warn", "error", "skipped") else "error"
    return {
        "name": test.name,
        "attached_to": test.attached_to,
        "column": test.column,
        "status": status,
        "failures": test.failures if isinstance(test.failures, int) and test.failures >= 0 else None,
        "message": test.message,
    }


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "kind": kind, "message": message}


def preload() -> None:
    """What a worker template does once for all its forks (`sandbox.fork_server`): import dbt, trimmed (layer
    1), and run the warm-up project once, so that each fork starts with dbt's process-wide caches warm and the
    project's parse saved (its own warm-up, the check of its layers, then takes that parse up). The template's
    run leaves no thread behind (a template forks only while single-threaded): dbt's static parser, whose pool
    of threads outlives the run, is off for it."""
    from coco_sql.languages.dbt.runner import DbtSession

    trim_dbt(os.getcwd())
    import coco_sql.languages.dbt.plugin  # noqa: F401
    from coco_sql.languages.dbt.validate import close_parser

    with DbtSession(memory_limit="256MB", static_parser=False, token=WORKER_TOKEN) as session:
        warm_up(session)
        _TEMPLATE_PARSE[PARTIAL_PARSE] = (session.workdir / "target" / PARTIAL_PARSE).read_bytes()
    close_parser()  # the validator's DuckDB parser holds threads, and a template forks only single-threaded


def serve(channel: Channel) -> None:
    init = channel.receive()
    if init is None or init["type"] != "init":
        raise RuntimeError("the parent must start with init")
    tables = {
        name: table_from(channel.receive_bytes()) for name in init["tables"]
    }  # Arrow IPC, from the parent
    trim_dbt(os.getcwd())
    import coco_sql.languages.dbt.plugin  # noqa: F401  (dbt-duckdb imports it by name at each run)

    layers, work = lock_down(init)
    worker = Worker(channel, init, tables, work)
    warm_up(worker.session)
    channel.send({"type": "ready", "layers": layers})
    while True:
        try:
            message = channel.receive()
        except EOFError:  # the parent closed the pipe: the sandbox is closed
            return
        if message is None or message["type"] not in ("validate", "run"):
            raise RuntimeError("the parent sent an AI answer out of turn")
        channel.send_bytes(worker.answer(message))


def main() -> None:
    serve(child_end(DBT_PARENT))


if __name__ == "__main__":
    main()
