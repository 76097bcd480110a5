"""A Python child process that speaks checked JSON messages over two pipes: where native code that can crash, or
a candidate that must be bounded, runs apart from the coco-sql process.

Used by the sandbox (`sandbox`: DuckDB with kernel limits) and by the in-process local model
(`llm.providers.local_llama`: llama.cpp). A crash there (SIGSEGV, an allocation the kernel refuses, SIGKILL at
a deadline) ends one child, and the caller sees `ChildDied` with how it ended, never a dead parent.

The child runs `python -m MODULE ARG...` in an empty temporary working directory, with an environment that holds
only what Python and the BLAS need (no credentials) and `PYTHONPATH` pointing at this package. Its pipes arrive
as stdin and stdout, and it moves them to the fixed descriptors 3 and 4 (`wire.child_end`): no descriptor number
is in its `sys.argv`, and no other descriptor of this process is open in it.

Every message it sends is hostile data: a length-prefixed JSON frame, refused past its protocol's size limit
and checked against the schema of its type before the caller sees it (`wire`, `messages`); a child that sends
anything else raises `ChildMisbehaved`, and the caller stops it. Nothing it sends is unpickled or evaluated.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coco_sql.wire import Channel, Protocol, WireError

PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])  # the folder that holds coco_sql/
_PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_PIPE_BYTES = 2**20  # a larger pipe buffer: a result crosses in fewer reads (Linux allows 1 MB unprivileged)


class ChildDied(Exception):
    """The child's pipe closed: it exited or was killed. The message says how (e.g. 'killed by SIGSEGV')."""


class ChildMisbehaved(Exception):
    """The child sent something its protocol does not allow (an oversized frame, not JSON, a wrong shape); the
    message says what, on one line. Nothing of it was used; the caller stops the child."""


class Process(typing.Protocol):
    """How a child's process is watched and ended, whoever started it: this process (`SpawnedProcess`) or a
    template it was forked from (`sandbox.fork_server`)."""

    pid: int
    peak_rss_bytes: int | None  # known once it was reaped

    def reaped(self) -> int | None:
        """Its return code (negative: the signal that killed it) once it ended, reaping it; None while it runs.
        Never blocks."""
        ...

    def kill(self) -> None:
        """SIGKILL, unless it was reaped already."""
        ...


@dataclass
class SpawnedProcess:
    """A child started here with `subprocess.Popen`, reaped with wait4 (which also tells its peak RSS)."""

    popen: subprocess.Popen[bytes]
    peak_rss_bytes: int | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def reaped(self) -> int | None:
        if self.popen.returncode is None:
            pid, status, usage = os.wait4(self.popen.pid, os.WNOHANG)
            if pid:
                self.popen.returncode = os.waitstatus_to_exitcode(status)
                self.peak_rss_bytes = usage.ru_maxrss * 1024
        return self.popen.returncode

    def kill(self) -> None:
        if self.popen.returncode is None:
            self.popen.kill()


@dataclass(frozen=True)
class Workspace:
    """What every child gets besides its process: an empty working folder, and a file for its stderr (outside
    the folder: the child cannot read it back)."""

    folder: str
    stderr_path: str

    @classmethod
    def make(cls) -> Workspace:
        folder = tempfile.mkdtemp(prefix="coco-child-")
        stderr_fd, stderr_path = tempfile.mkstemp(prefix="coco-child-", suffix=".stderr")
        os.close(stderr_fd)
        return cls(folder, stderr_path)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.unlink(self.stderr_path)


def child_environment(threads: int, settings: Mapping[str, str] | None) -> dict[str, str]:
    """The whole environment of a child: what Python and the BLAS need, and `settings` (no credentials)."""
    env = {name: os.environ[name] for name in _PASSED_ENV if name in os.environ}
    return env | {
        "PYTHONPATH": PACKAGE_ROOT,
        "PYTHONHASHSEED": "0",  # set and str iteration order is the same in every worker: runs reproduce
        "OPENBLAS_NUM_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        **(settings or {}),
    }


def spawn(
    module: str, args: Sequence[str], stdin: int, stdout: int, workspace: Workspace, env: Mapping[str, str]
) -> SpawnedProcess:
    """`python -m module args...` in `workspace`, its stdin and stdout the descriptors given, and no other of
    this process's descriptors."""
    with open(workspace.stderr_path, "wb") as stderr:
        popen = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            close_fds=True,
            cwd=workspace.folder,
            env=dict(env),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
        )
    return SpawnedProcess(popen)


def pipes() -> tuple[tuple[int, int], tuple[int, int]]:
    """(parent's read end, child's write end), (child's read end, parent's write end), the parent's ends with
    a larger buffer."""
    parent_in, child_out = os.pipe()
    child_in, parent_out = os.pipe()
    for fd in (parent_in, parent_out):
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    return (parent_in, child_out), (child_in, parent_out)


@dataclass
class ChildProcess:
    process: Process
    channel: Channel
    workspace: Workspace

    @classmethod
    def start(
        cls,
        module: str,
        *args: str,
        receives: Protocol,
        threads: int = 1,
        settings: Mapping[str, str] | None = None,
    ) -> ChildProcess:
        """Start `python -m module args...`; `receives` is what the child may send (its messages are parsed
        with it); `settings`: environment variables the child needs beside the fixed ones (settings of its
        libraries only: the child's environment carries no credentials)."""
        (parent_in, child_out), (child_in, parent_out) = pipes()
        workspace = Workspace.make()
        try:
            process = spawn(
                module, args, child_in, child_out, workspace, child_environment(threads, settings)
            )
        except OSError:
            workspace.remove()
            os.close(parent_in)
            os.close(parent_out)
            raise
        finally:
            os.close(child_in)
            os.close(child_out)
        return cls(process, Channel(parent_in, parent_out, receives), workspace)

    @property
    def folder(self) -> str:
        return self.workspace.folder

    @property
    def stderr_path(self) -> str:
        return self.workspace.stderr_path

    @property
    def peak_rss_bytes(self) -> int | None:
        """The child's peak resident memory, known once it is reaped by stop()."""
        return self.process.peak_rss_bytes

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, message: dict[str, Any]) -> None:
        """Send one message (`wire.dumps`: plain values; see `wire.exact` for the rest)."""
        try:
            self.channel.send(message)
        except OSError:
            raise ChildDied(self.how_it_ended()) from None

    def send_bytes(self, data: bytes) -> None:
        try:
            self.channel.send_bytes(data)
        except OSError:
            raise ChildDied(self.how_it_ended()) from None

    def receive(self, until: float | None) -> dict[str, Any] | None:
        """The next message, checked against the child's protocol, or None when `until` (time.monotonic)
        passes first; None waits for ever. ChildDied when its pipe closed, ChildMisbehaved for a message its
        protocol does not allow."""
        try:
            return self.channel.receive(until)
        except WireError as error:
            raise ChildMisbehaved(str(error)) from None
        except (EOFError, OSError):
            raise ChildDied(self.how_it_ended()) from None

    def alive(self) -> bool:
        return self.process.reaped() is None

    def cpu_seconds(self) -> float | None:
        """The CPU time (user and system) the child has spent so far, from the kernel's own count
        (`/proc/PID/stat`); None where there is no /proc or the child is gone."""
        return process_cpu_seconds(self.pid)

    def how_it_ended(self) -> str:
        code = self._reap(timeout_s=5.0)
        if code is None:
            return "its pipe closed"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        last = self.last_stderr_line()
        return f"exit status {code}" + (f": {last}" if last else "")

    def last_stderr_line(self) -> str:
        """The last line the child wrote on stderr (a Python traceback ends with the exception), or ''."""
        try:
            with open(self.stderr_path, "rb") as stream:
                stream.seek(max(0, os.fstat(stream.fileno()).st_size - 4096))
                lines = stream.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def stop(self, *, kill: bool = False) -> None:
        """Close the pipes (the child's cue to exit), or kill it outright; then reap it and remove its folder."""
        self.channel.close()
        if kill:
            self.process.kill()
        if self._reap(timeout_s=5.0) is None:
            self.process.kill()
            self._reap(timeout_s=None)
        self.workspace.remove()

    def _reap(self, timeout_s: float | None) -> int | None:
        """Wait for the child to end; its return code, or None when `timeout_s` passed first."""
        until = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            code = self.process.reaped()
            if code is not None:
                return code
            if until is not None and time.monotonic() >= until:
                return None
            time.sleep(0.01)


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of process `pid` in seconds (fields 14 and 15 of `/proc/PID/stat`, after the command name,
    which may itself hold spaces and parentheses); None without /proc or once the process is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
