"""Worker templates: a process that has imported a worker's libraries once and forks a fresh worker per request.

A SQL worker started from scratch spends about 0.5 s of CPU importing Python, DuckDB and pyarrow before it reads
a row, and a dbt worker about 4 s importing dbt; a run starts one per split, and a test suite about a thousand.
A template does those imports once (the module's `preload()`), then forks: the fork is the worker, and runs the
module's `main()` exactly as `python -m module` would have, so everything the worker promises it still does
itself, after the fork (its limits, namespaces, jail, Landlock and seccomp filter).

What a forked worker shares with one started from scratch, and how:
- **Its own pipes, and no other descriptor.** The parent makes the worker's pipes and its stderr file, and passes
  them to the template over a Unix socket (SCM_RIGHTS) after the `fork` message; the fork puts them at 0, 1 and
  2 and closes every other descriptor (the template's socket among them) before any worker code runs.
- **Nothing of the parent.** The template was started like any child (`child.child_environment`: no
  credentials, an empty working folder) and has read no split, no task and no message but `fork` and `reap`.
  Each worker gets its own empty working folder, made by the parent.
- **Its exit status and peak memory.** Only a process's parent can wait for it, so the template reaps its forks,
  but only when the parent asks (`reap`): until then a fork that ended stays a zombie, its pid cannot be reused,
  and the parent's SIGKILL (through a pidfd, opened while the pid is still the fork's) cannot reach another
  process.
- **Seen as a process start.** A fork request raises the audit event `FORK_EVENT` first, so a hook that
  refuses processes (`engines.snowflake.strict`: a stored procedure may start none) refuses it too.
- **One thread at the fork.** The template refuses to fork while it has a second thread (a library that started
  one at import: pyarrow's jemalloc thread is turned off by `TEMPLATE_SETTINGS`, DuckDB's default database is
  never opened), so no lock held by another thread is copied into the worker.

Where a template cannot be had (it failed to start, or refused), `start_worker` starts the worker from scratch,
as before, and says so in `WorkerTemplate.unavailable`. Templates are kept per process (`template`), one per
worker module, preload list and environment; a process that forked (or a pytest worker) gets its own.

`bench/bench_sandbox.py` measures a start either way.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coco_sql.child import (
    ChildDied,
    ChildMisbehaved,
    ChildProcess,
    Workspace,
    child_environment,
    pipes,
    spawn,
)
from coco_sql.messages import FORK_PARENT, FORK_SERVER
from coco_sql.wire import Channel, Protocol, child_end

START_TIMEOUT_S = 60.0
ANSWER_TIMEOUT_S = 30.0
# pyarrow starts jemalloc's background thread at import unless told not to (the workers' Arrow buffers come from
# the system allocator anyway: `sandbox.database.WORKER_SETTINGS`)
TEMPLATE_SETTINGS = {"JE_ARROW_MALLOC_CONF": "background_thread:false"}
# the audit event of a fork request: the template starts the process, so no event of this process's own says so
# (`engines.snowflake.strict` counts it with the process events a stored procedure may not raise)
FORK_EVENT = "coco_sql.sandbox.fork"


class TemplateUnavailable(Exception):
    """The template could not fork a worker (it did not start, broke its protocol, or refused); one line."""


# ------------------------------------------------------------------------------------------ the parent's side
@dataclass
class ForkedProcess:
    """A worker forked by a template: signalled through a pidfd, reaped by asking the template."""

    server: WorkerTemplate
    pid: int
    pidfd: int | None
    returncode: int | None = None
    peak_rss_bytes: int | None = None

    def reaped(self) -> int | None:
        if self.returncode is None:
            ended = self.server.reap(self.pid)
            if ended is not None:
                self.returncode, self.peak_rss_bytes = ended
                self._close_pidfd()
        return self.returncode

    def kill(self) -> None:
        if self.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:  # no pidfd (an old kernel): the template holds the zombie, so the pid is still this fork's
                os.kill(self.pid, signal.SIGKILL)

    def _close_pidfd(self) -> None:
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = None


@dataclass
class WorkerTemplate:
    """The template of one worker module. `start(receives)` returns a started worker, forked from the template
    when it can be, else started from scratch; the template itself starts on first use."""

    module: str
    preload: tuple[str, ...] = ()
    settings: Mapping[str, str] = field(default_factory=dict)
    unavailable: str | None = None  # why workers are started from scratch, once a template failed
    forks: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _server: ChildProcess | None = field(default=None, repr=False)
    _socket: socket.socket | None = field(default=None, repr=False)

    def start(self, receives: Protocol) -> ChildProcess:
        """A fresh worker running `module.main()`, its pipes parsed with `receives`."""
        if self.unavailable is None:
            try:
                return self._fork(receives)
            except TemplateUnavailable as reason:
                self.unavailable = str(reason)
                self.close()
        return ChildProcess.start(self.module, receives=receives, settings=self.settings)

    def reap(self, pid: int) -> tuple[int, int | None] | None:
        """(return code, peak RSS bytes) of a fork that ended, None while it runs. A template that is gone
        reports its forks as killed (they were orphaned, and end when their pipes close)."""
        with self._lock:
            try:
                answer = self._ask({"type": "reap", "pid": pid}, "reaped")
            except TemplateUnavailable:
                return (-9, None)
        if answer["pid"] != pid:
            raise ChildMisbehaved(f"the worker template reaped pid {answer['pid']} when asked for {pid}")
        return None if answer["code"] is None else (answer["code"], answer["peak_rss"])

    def close(self, *, kill: bool = False) -> None:
        """End the template (its forks live on until their own pipes close). The socket closes first: the
        channel reads and writes duplicates of it, and the template sees the end only when all are closed."""
        server, self._server = self._server, None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if server is not None:
            server.stop(kill=kill)

    # -- internals -------------------------------------------------------------------------------------------
    def _fork(self, receives: Protocol) -> ChildProcess:
        # a process started on this one's behalf: audit hooks see it as such
        sys.audit(FORK_EVENT, self.module)
        (parent_in, child_out), (child_in, parent_out) = pipes()
        workspace = Workspace.make()
        stderr = os.open(workspace.stderr_path, os.O_WRONLY)
        try:
            with self._lock:
                self._ensure()
                assert self._socket is not None
                self._send({"type": "fork", "folder": workspace.folder})
                try:
                    socket.send_fds(self._socket, [b"F"], [child_in, child_out, stderr])
                except OSError as error:
                    raise TemplateUnavailable(f"the worker template took no descriptors ({error})") from None
                answer = self._receive("forked")
            pid = answer["pid"]
            try:
                pidfd: int | None = os.pidfd_open(pid)
            except (AttributeError, OSError):
                pidfd = None
        except BaseException:
            workspace.remove()
            os.close(parent_in)
            os.close(parent_out)
            raise
        finally:
            for fd in (child_in, child_out, stderr):
                os.close(fd)
        self.forks += 1
        return ChildProcess(
            ForkedProcess(self, pid, pidfd), Channel(parent_in, parent_out, receives), workspace
        )

    def _ensure(self) -> None:
        if self._server is not None:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        workspace = Workspace.make()
        env = child_environment(1, {**self.settings, **TEMPLATE_SETTINGS})
        try:
            process = spawn(
                __name__, [self.module, *self.preload], theirs.fileno(), theirs.fileno(), workspace, env
            )
        except OSError as error:
            workspace.remove()
            ours.close()
            raise TemplateUnavailable(f"the worker template could not start ({error})") from None
        finally:
            theirs.close()
        self._socket = ours
        self._server = ChildProcess(
            process, Channel(os.dup(ours.fileno()), os.dup(ours.fileno()), FORK_SERVER), workspace
        )
        self._receive("ready", timeout_s=START_TIMEOUT_S)

    def _ask(self, message: dict[str, Any], expected: str) -> dict[str, Any]:
        self._send(message)
        return self._receive(expected)

    def _send(self, message: dict[str, Any]) -> None:
        if self._server is None:
            raise TemplateUnavailable("the worker template is not running")
        try:
            self._server.send(message)
        except ChildDied as death:
            raise self._lost(f"the worker template died ({death})") from None

    def _receive(self, expected: str, timeout_s: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        assert self._server is not None
        try:
            answer = self._server.receive(until=time.monotonic() + timeout_s)
        except ChildDied as death:
            raise self._lost(f"the worker template died ({death})") from None
        except ChildMisbehaved as error:
            raise self._lost(f"the worker template broke its protocol: {error}") from None
        if answer is None:
            raise self._lost("the worker template did not answer in time")
        if answer["type"] == "refused":
            raise self._lost(f"the worker template refused to fork: {answer['message']}")
        if answer["type"] != expected:
            raise self._lost(f"the worker template answered {answer['type']!r} where {expected!r} was due")
        return answer

    def _lost(self, reason: str) -> TemplateUnavailable:
        self.close(kill=True)
        return TemplateUnavailable(reason)


_TEMPLATES: dict[tuple[int, str, tuple[str, ...], tuple[tuple[str, str], ...]], WorkerTemplate] = {}
_TEMPLATES_LOCK = threading.Lock()


def template(
    module: str, preload: Sequence[str] = (), settings: Mapping[str, str] | None = None
) -> WorkerTemplate:
    """This process's template of `module` (preloading `preload` too) with `settings` in its environment.

    A process resource, like a thread pool: every sandbox of this process forks its workers from it, and a
    forked copy of this process (its pid differs) gets its own."""
    key = (os.getpid(), module, tuple(preload), tuple(sorted((settings or {}).items())))
    with _TEMPLATES_LOCK:
        if not _TEMPLATES:
            atexit.register(_close_templates)
        found = _TEMPLATES.get(key)
        if found is None:
            found = _TEMPLATES[key] = WorkerTemplate(module, tuple(preload), dict(settings or {}))
        return found


def _close_templates() -> None:
    """At exit: end this process's templates, which removes their folders and stderr files (a forked copy of
    this process leaves its parent's alone)."""
    with _TEMPLATES_LOCK:
        for (owner, *_), found in _TEMPLATES.items():
            if owner == os.getpid():
                found.close()


# ---------------------------------------------------------------------------------------- the template's side
def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _become_worker(target: Any, fds: Sequence[int], folder: str) -> None:
    """In the fork: the worker's pipes at 0 and 1 and its stderr at 2, every other descriptor closed, its own
    folder; then the module's `main()`, as `python -m module` runs it. Never returns."""
    code = 0
    try:
        for fd, number in zip(fds, (0, 1, 2), strict=True):
            os.dup2(fd, number)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.chdir(folder)
        target.main()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _answer_reap(channel: Channel, pid: int) -> None:
    try:
        ended, status, usage = os.wait4(pid, os.WNOHANG)
    except ChildProcessError:  # not a fork of this template (or reaped already)
        channel.send({"type": "reaped", "pid": pid, "code": -9, "peak_rss": None})
        return
    if not ended:
        channel.send({"type": "reaped", "pid": pid, "code": None, "peak_rss": None})
        return
    code = os.waitstatus_to_exitcode(status)
    channel.send({"type": "reaped", "pid": pid, "code": code, "peak_rss": usage.ru_maxrss * 1024})


def serve(channel: Channel, module: str, preload: Sequence[str]) -> None:
    """The template's loop: import, then answer `fork` and `reap` until the parent closes the socket."""
    for name in preload:
        importlib.import_module(name)
    target = importlib.import_module(module)
    target.preload()
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != os.getcwd()]
    fds_socket = socket.socket(fileno=os.dup(channel.read_fd))
    channel.send({"type": "ready"})
    while True:
        try:
            message = channel.receive()
        except EOFError:
            return
        assert message is not None
        if message["type"] == "reap":
            _answer_reap(channel, message["pid"])
            continue
        _, fds, _, _ = socket.recv_fds(fds_socket, 1, 3)
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            channel.send({"type": "refused", "message": f"the fork request came with {len(fds)} descriptors"})
            continue
        threads = _threads()
        if threads != 1:
            for fd in fds:
                os.close(fd)
            channel.send({"type": "refused", "message": f"the template runs {threads} threads"})
            continue
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become_worker(target, fds, message["folder"])
        for fd in fds:
            os.close(fd)
        channel.send({"type": "forked", "pid": pid})


def main() -> None:
    module, *preload = sys.argv[1:]
    serve(child_end(FORK_PARENT), module, preload)


if __name__ == "__main__":
    main()
