"""Snowflake's documented limits on a stored procedure, enforced around the handlers of a local-testing session.

Snowpark's local testing mode runs a procedure's handler in the caller's own process and enforces none of the
limits a real account does, so a handler that starts a process passes there and fails on Snowflake. While a
procedure called through `session.call` runs, `strict_procedures(session)` refuses, with PermissionError, and
counts (`StrictLimits.refused`):

- **processes**: `subprocess.Popen`, `os.fork`/`forkpty`, `os.posix_spawn`, the `os.exec*`/`os.spawn*` family,
  `os.system`, a sandbox worker forked by its template (`sandbox.fork_server`), and `_posixsubprocess.fork_exec` (multiprocessing's spawn start method raises no audit event of
  its own; its fork and forkserver methods do). Docs, "Python stored procedure limitations": one edition says
  creating processes is not supported, a newer one that the multiprocessing module is not. The conservative
  reading, followed here: no process of any kind.
- **sockets**: creating, binding or connecting one (a handler reaches the warehouse through its session only;
  external access needs an integration coco-sql does not ask for).
- **files**: opening a file for writing, creating, removing or renaming one, anywhere but under /tmp (the only
  writable directory a handler has). Bytecode is not written meanwhile (`sys.dont_write_bytecode`): a read-only
  package directory is what a handler sees there too.
- **threads**: the session is used from the thread that called the procedure only ("running concurrent queries
  is not supported in stored procedures"): any other thread that touches it gets PermissionError.

Refusals are counted even when the code under test catches them, so a test can assert that none happened
(`StrictLimits.check()`), which is what proves that no process was started inside a handler.

Python audit hooks cannot be removed once added, so one hook per process serves every `strict_procedures`
block (`_ACTIVE`); outside a block, and outside a handler call, it refuses nothing.
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

WRITABLE = "/tmp"
_PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system",
     "os.startfile", "pty.spawn",
     "coco_sql.sandbox.fork"}  # a sandbox worker forked by its template (`sandbox.fork_server.FORK_EVENT`)
)  # fmt: skip
_SOCKET_EVENTS = frozenset({"socket.__new__", "socket.bind", "socket.connect", "socket.sendto"})
# audit events that write a path: (the argument holding the path, the one holding its dir_fd or None), each
_PATH_EVENTS: dict[str, tuple[tuple[int, int | None], ...]] = {
    "os.remove": ((0, 1),), "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),), "os.rename": ((0, 2), (1, 3)),
    "os.link": ((1, 3),), "os.symlink": ((1, 2),), "os.chmod": ((0, 2),), "os.chown": ((0, 3),),
    "os.utime": ((0, 3),), "os.truncate": ((0, None),), "shutil.rmtree": ((0, 1),), "shutil.move": ((0, None), (1, None)),
    "shutil.copyfile": ((1, None),),
}  # fmt: skip
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_CONNECTION_METHODS = ("execute", "run_query", "get_result_set", "get_result_and_metadata", "upload_file",
                       "upload_stream")  # fmt: skip
_REGISTRY_METHODS = ("read_table", "write_table", "drop_table", "read_table_if_exists", "create_or_replace_view",
                     "read_view_if_exists")  # fmt: skip

_ACTIVE: list[StrictLimits] = []  # the blocks now open (the audit hook is process-wide: see the docstring)
_HOOKED = threading.Lock()
_hook_installed = False


@dataclass
class StrictLimits:
    """What one `strict_procedures` block refused, by kind ('process', 'socket', 'file', 'thread')."""

    refused: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)  # the first few refusals, for the failure message
    calls: int = 0  # procedure calls made under these limits
    _depth: int = 0
    _owner: int | None = None

    @property
    def inside(self) -> bool:
        return self._depth > 0

    def refuse(self, kind: str, what: str) -> None:
        self.refused[kind] += 1
        if len(self.examples) < 5:
            self.examples.append(f"{kind}: {what}")
        raise PermissionError(f"not allowed in a Snowflake stored procedure: {what}")

    def check(self) -> None:
        """AssertionError naming what was refused, if anything was (caught or not)."""
        if self.refused:
            raise AssertionError(f"a handler broke Snowflake's limits {dict(self.refused)}: {self.examples}")

    @contextlib.contextmanager
    def handler_call(self) -> Iterator[None]:
        """The limits hold while the block runs: one procedure call."""
        self._depth += 1
        self._owner, owner = threading.get_ident(), self._owner
        bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
        self.calls += 1
        try:
            yield
        finally:
            self._depth -= 1
            self._owner = owner
            sys.dont_write_bytecode = bytecode

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event in _PROCESS_EVENTS:
            self.refuse("process", f"{event} {_short(args)}")
        elif event in _SOCKET_EVENTS:
            self.refuse("socket", f"{event} {_short(args)}")
        elif event == "open" and _writes(args) and not _under_tmp(args[0]):
            self.refuse("file", f"open {args[0]!r} for writing")
        elif event in _PATH_EVENTS and not all(
            _under_tmp(args[at], args[fd] if fd is not None and fd < len(args) else None)
            for at, fd in _PATH_EVENTS[event]
            if at < len(args)
        ):
            self.refuse("file", f"{event} {_short(args)}")

    def same_thread(self, what: str) -> None:
        if self.inside and threading.get_ident() != self._owner:
            self.refuse("thread", f"the procedure's session used from another thread ({what})")


@contextlib.contextmanager
def strict_procedures(session: Any) -> Iterator[StrictLimits]:
    """Enforce the limits (module docstring) on every procedure `session.call` runs inside the block; yields the
    counters. A local-testing session only: the guards wrap its mock connection."""
    limits = StrictLimits()
    _install_hook()
    restore = [_wrap(session, "call", lambda original: _calling(limits, original))]
    connection = session._conn
    for target, names in ((connection, _CONNECTION_METHODS), (connection.entity_registry, _REGISTRY_METHODS)):
        restore += [_wrap(target, name, lambda original, n=name: _guarded(limits, n, original))
                    for name in names if callable(getattr(target, name, None))]  # fmt: skip
    fork_exec = _posixsubprocess.fork_exec
    _posixsubprocess.fork_exec = _refusing_fork_exec(fork_exec)  # type: ignore[assignment]
    _ACTIVE.append(limits)
    try:
        yield limits
    finally:
        _ACTIVE.remove(limits)
        _posixsubprocess.fork_exec = fork_exec  # type: ignore[assignment]
        for undo in reversed(restore):
            undo()


# -- internals ---------------------------------------------------------------------------------------------------
def _install_hook() -> None:
    global _hook_installed
    with _HOOKED:
        if not _hook_installed:
            sys.addaudithook(_hook)
            _hook_installed = True


def _hook(event: str, args: tuple[Any, ...]) -> None:
    for limits in _ACTIVE:
        if limits.inside:
            limits.audit(event, args)


def _refusing_fork_exec(original: Callable[..., int]) -> Callable[..., int]:
    def fork_exec(*args: Any, **kwargs: Any) -> int:
        for limits in _ACTIVE:
            if limits.inside:
                limits.refuse("process", f"_posixsubprocess.fork_exec {_short(args[:1])}")
        return original(*args, **kwargs)

    return fork_exec


def _calling(limits: StrictLimits, original: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        with limits.handler_call():
            return original(*args, **kwargs)

    return call


def _guarded(limits: StrictLimits, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def method(*args: Any, **kwargs: Any) -> Any:
        limits.same_thread(name)
        return original(*args, **kwargs)

    return method


def _wrap(
    target: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> Callable[[], None]:
    """Shadow `target.name` with `make(original)` on the instance; returns what undoes it."""
    had = name in vars(target)
    original = getattr(target, name)
    setattr(target, name, make(original))

    def undo() -> None:
        if had:
            setattr(target, name, original)
        else:
            delattr(target, name)

    return undo


def _writes(args: tuple[Any, ...]) -> bool:
    """Whether an `open` audit event (path, mode, flags) opens for writing."""
    _, mode, flags = (*args, None, None)[:3]
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _under_tmp(path: Any, dir_fd: Any = None) -> bool:
    """Under /tmp once resolved (relative to the directory `dir_fd` is open on, when given); a descriptor number
    (a file opened before) is not a path to check."""
    if isinstance(path, int):
        return True
    try:
        name = os.fsdecode(path)
        if isinstance(dir_fd, int) and not os.path.isabs(name):
            name = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
        resolved = os.path.realpath(name)
    except (TypeError, ValueError, OSError):
        return False
    return resolved == WRITABLE or resolved.startswith(WRITABLE + os.sep)


def _short(args: tuple[Any, ...]) -> str:
    return repr(args)[:120]
