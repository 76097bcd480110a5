"""The Python sandbox worker: a zygote that holds one split's instances, and forks one fresh process per candidate.

Started by `sandbox.python_sandbox.PythonSandbox` as `python -m coco_sql.sandbox.python_worker`
(`child.ChildProcess`: its pipes at the fixed descriptors 3 and 4, an empty temporary working directory, an
environment without credentials), it first replaces itself with a fresh interpreter that imports no other part
of coco-sql than the standard-library-only `wire`, `messages` and `sandbox.kernel_layers` (`main`). That
process is the zygote: it receives its split's instances, the task's harness and the import allow-list, imports
them, locks itself down, and then hands every `run` message's program to a process of its own, forked for that
one candidate (ahead of time, while the previous answer is being read), which runs it and exits. What a candidate sees, layer by layer, in the order they are applied:

1. **Namespaces** (zygote, when the kernel lets this user create them; `layers["namespaces"]`): a new user,
   network and IPC namespace, entered before any thread exists. The network namespace has only a loopback
   interface, down: no address outside the process is reachable, 127.0.0.1 of the host included. In the new
   user namespace the process holds no capability over the host: it cannot raise a resource limit again.
2. **Imports, then chroot** (zygote; `layers["chroot"]`, needs 1): the allowed modules and the harness are
   imported while the file system is visible; then the process changes its root to its empty working
   directory, so no file of the machine (the pack's data files, /proc) can be opened afterwards.
3. **Kernel limits**: RLIMIT_DATA = the memory bound (a larger allocation raises MemoryError, reported as a
   memory error), RLIMIT_FSIZE = 0 (no byte can be written to a file), RLIMIT_NOFILE small, RLIMIT_CORE = 0
   (zygote, inherited); RLIMIT_NPROC = 0 (no process or thread, when not root of the host) and RLIMIT_CPU as
   a backstop (the candidate's process only).
4. **seccomp** (x86_64 Linux; `layers["seccomp"]`): the zygote's filter makes these system calls fail with
   EPERM: creating sockets; exec; signals other than kill, ptrace and process_vm_*; opening any file, for
   reading too; creating, truncating, renaming, linking or deleting a file or changing its metadata; mounts,
   chroot, namespaces, io_uring, bpf and keys. The candidate's process adds its own filter on top (filters
   stack), which also refuses fork, clone, kill and setrlimit (`kernel_layers`).
5. **One process per candidate** (always): the candidate runs in a process forked from the zygote that closes
   every descriptor but its two pipes to the zygote (the program in, its answer out; the zygote's pipes to
   coco-sql are closed), runs the program over every instance, writes one answer
   (`messages.PYTHON_CANDIDATE`) and exits. Whatever it changes
   (a module's attributes, numpy's error state, a class of the standard library, the harness's globals) ends
   with it: the next candidate starts from the zygote again.
6. **In-process** (always, not a boundary on its own): the socket constructors of `socket` and `_socket` raise;
   candidate modules run with an allow-list of builtins (no open, exec, eval, compile, input, getattr...)
   whose `__import__` serves only the allowed modules.

The zygote reads the candidate's answer as hostile data (size-limited, parsed against its schema), kills the
process, and only then passes the answer on (coco-sql parses it again): the candidate never writes to
coco-sql's pipe.

Time: the candidate's process raises `_Deadline` in the program at the deadline (SIGALRM) and reports a
timeout; a program that swallows it is killed by the zygote (SIGKILL) once the deadline and its grace period
have passed, and the zygote lives on. The parent kills the zygote only if it does not answer either.

Messages (`messages`): parent -> zygote `PYTHON_PARENT` (init, run); zygote -> parent `PYTHON_ZYGOTE` (ready,
result, error); candidate -> zygote `PYTHON_CANDIDATE` (result, error). `outputs` is `[(instance_id, output)]`
for the instances the harness finished, `failures` is `[(instance_id, one-line reason)]` for the others.
"""

from __future__ import annotations

import _socket
import builtins
import contextlib
import gc
import os
import signal
import socket
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

if __name__ == "__main__":  # the fresh interpreter (`-I`) runs this file as a script: find its package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from coco_sql.messages import PYTHON_CANDIDATE, PYTHON_PARENT
from coco_sql.sandbox.kernel_layers import (
    ZYGOTE_ALLOWED,
    change_root_here,
    die_with_parent,
    enter_namespaces,
    install_seccomp,
    set_candidate_limits,
    set_zygote_limits,
)
from coco_sql.wire import (
    CHILD_INBOX_FD,
    CHILD_OUTBOX_FD,
    Channel,
    WireError,
    child_end,
    dumps,
    exact,
)

if __name__ == "__main__":
    del sys.path[0]

# ------------------------------------------------------------------------------------------------ layer 6

_SAFE_BUILTINS = """
    abs all any ascii bin bool bytearray bytes callable chr classmethod complex dict divmod enumerate filter
    float format frozenset hash hex int isinstance issubclass iter len list map max min next object oct ord pow
    print property range repr reversed round set slice sorted staticmethod str sum super tuple type zip
    __build_class__ NotImplemented Ellipsis None True False
    ArithmeticError AssertionError Exception IndexError KeyError LookupError NotImplementedError OverflowError
    RuntimeError StopIteration TypeError ValueError ZeroDivisionError
""".split()  # noqa: SIM905  (a word list reads better than 70 quoted strings)


class ImportRefused(ImportError):
    pass


def restricted_builtins(allowed_modules: frozenset[str]) -> dict[str, Any]:
    """The builtins a candidate module runs with: the allow-list, and an `__import__` that hands out the
    already imported allowed modules only."""

    def restricted_import(
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: Iterable[str] | None = (),
        level: int = 0,
    ) -> ModuleType:
        if level != 0 or name not in allowed_modules or name not in sys.modules:
            raise ImportRefused(f"import of {name!r} is not allowed in the sandbox")
        return sys.modules[name] if fromlist else sys.modules[name.partition(".")[0]]

    table = {name: getattr(builtins, name) for name in _SAFE_BUILTINS}
    table["__import__"] = restricted_import
    return table


def disable_sockets() -> None:
    """The socket constructors raise (in-process; layers 1 and 4 are what stops a program that gets past it)."""

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError("network access is disabled in the sandbox")

    for module in (socket, _socket):
        for name in ("socket", "socketpair", "fromfd", "create_connection", "create_server", "SocketType"):
            if hasattr(module, name):
                setattr(module, name, refused)


# ------------------------------------------------------------------------------------- running one program


class _Deadline(BaseException):
    """Raised in the candidate at its deadline; not an Exception, so `except Exception` does not swallow it."""


class ProgramFailed(Exception):
    """The module as a whole failed (it does not compile, raises at import, or lacks the entry function)."""


def _reason(error: BaseException) -> str:
    """One line: the exception and the candidate's line it was raised on."""
    line = None
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<candidate>":
            line = tb.tb_lineno
        tb = tb.tb_next
    text = " ".join(str(error).split())[:300]
    where = f" (line {line})" if line is not None else ""
    return f"{type(error).__name__}{': ' + text if text else ''}{where}"


class Worker:
    """What the zygote holds for its candidates: the instances, the harness's `run`, the restricted builtins."""

    def __init__(
        self, init: Mapping[str, Any], harness_run: Callable[[Callable[..., Any], Any], Any]
    ) -> None:
        self.instances: list[tuple[str, dict[str, Any]]] = list(init["instances"])
        self.entry: str = init["entry"]
        self.harness_run = harness_run
        self.builtins = restricted_builtins(frozenset(init["modules"]))

    def run(self, source: str) -> tuple[list[tuple[str, Any]], list[tuple[str, str]]]:
        """Every instance through the harness; ProgramFailed, _Deadline and MemoryError end the whole run. An
        output is kept in its wire form (`wire.exact`): one that cannot cross fails its instance."""
        outputs: list[tuple[str, Any]] = []
        failures: list[tuple[str, str]] = []
        entry = self._load(source)
        for instance_id, instance in self.instances:
            try:
                outputs.append((instance_id, exact(self.harness_run(entry, instance))))
            except MemoryError:
                raise
            except Exception as error:
                failures.append((instance_id, _reason(error)))
        return outputs, failures

    def _load(self, source: str) -> Callable[..., Any]:
        try:
            code: CodeType = compile(source, "<candidate>", "exec")
        except SyntaxError as error:
            raise ProgramFailed(f"the program does not compile: {error.msg} (line {error.lineno})") from None
        namespace: dict[str, Any] = {"__builtins__": self.builtins, "__name__": "candidate"}
        try:
            exec(code, namespace)
        except MemoryError:
            raise
        except Exception as error:
            raise ProgramFailed(f"the program fails when loaded: {_reason(error)}") from None
        entry = namespace.get(self.entry)
        if not callable(entry):
            raise ProgramFailed(f"the program defines no function {self.entry!r}")
        return entry


def _alarm(signum: int, frame: object) -> None:
    raise _Deadline()


def answer(worker: Worker, source: str, deadline_s: float) -> dict[str, Any]:
    """One run under the deadline, as the message that reports it."""
    start = time.perf_counter()
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, max(deadline_s, 1e-3))
            outputs, failures = worker.run(source)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)  # the alarm may fire in here: the outer handlers see it
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        return {"type": "result", "outputs": outputs, "failures": failures, "elapsed_ms": elapsed_ms}
    except _Deadline:
        return _error("timeout", f"the program exceeded its {deadline_s:g} s deadline")
    except MemoryError:
        return _error("memory", "the program ran out of memory")
    except ProgramFailed as failure:
        return _error("error", str(failure))
    except BaseException as error:  # SystemExit and the like, raised by the program itself
        return _error("error", f"the program raised {_reason(error)}")


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "kind": kind, "message": message}


# ------------------------------------------------------------------------------------------------ the zygote


@dataclass
class _Spare:
    """A process forked ahead of time, locked down and waiting for its program on `to_child`."""

    pid: int
    to_child: int  # the zygote's end of the pipe that carries the program
    from_child: int  # the zygote's end of the pipe that carries the answer


class Zygote:
    """The locked-down process that forks one process per candidate and reports what it answered.

    The process for the next candidate is forked ahead of time (`prepare`, after an answer went out), so that
    forking it, and reaping the last one, is not on the evaluation's path; it is locked down before it waits.
    """

    def __init__(self, parent: Channel, init: Mapping[str, Any], worker: Worker, seccomp: bool) -> None:
        self.parent = parent
        self.init = init
        self.worker = worker
        self.seccomp = seccomp  # the candidate's process installs its own filter too
        self._spare: _Spare | None = None
        self._finished: int | None = None  # a killed process, reaped by `prepare`

    def prepare(self) -> None:
        """Reap the last candidate's process and fork the next one."""
        if self._finished is not None:
            os.waitpid(self._finished, 0)
            self._finished = None
        if self._spare is None:
            with contextlib.suppress(OSError):  # `run` tries again, and reports the failure
                self._spare = self._fork()

    def close(self) -> None:
        """End the process waiting for a program, and reap the last one."""
        for pid in (self._spare.pid if self._spare else None, self._finished):
            if pid is not None:
                _reap(pid, kill=True)
        self._spare = self._finished = None

    def run(self, source: str, deadline_s: float) -> bytes:
        """Hand the program to a fresh process and read its one answer; SIGKILL it once the answer is in or the
        deadline and its grace period are over. The frame for the parent: the answer as the child wrote it once
        it parsed (the parent parses it again), or the zygote's own error."""
        try:
            spare = self._spare or self._fork()
        except OSError as error:
            return dumps(_error("crashed", f"the program's process could not be started ({error})"))
        self._spare = None
        until = time.monotonic() + deadline_s + self.init["kill_grace_s"]
        with contextlib.suppress(OSError):  # a process that died already: its end shows below
            Channel(-1, spare.to_child, PYTHON_PARENT).send(
                {"type": "run", "source": source, "deadline_s": deadline_s}
            )
        os.close(spare.to_child)
        inbox = Channel(spare.from_child, -1, PYTHON_CANDIDATE)
        try:
            payload = inbox.receive_bytes(until, limit=self.init["max_answer_bytes"])
            if payload is not None:
                PYTHON_CANDIDATE.decode(payload)
        except EOFError:  # it closed its answer pipe: it ended, or should end by its deadline
            status = _reap_by(spare.pid, until)
            if status is None:
                return dumps(
                    _error("killed", f"the program exceeded its {deadline_s:g} s deadline and was killed")
                )
            return dumps(_crashed(status))
        except WireError as error:
            payload = None
            answer = dumps(_error("malformed", f"{error}; the program's process was stopped"))
        else:
            answer = (
                bytes(payload)
                if payload is not None
                else dumps(
                    _error("killed", f"the program exceeded its {deadline_s:g} s deadline and was killed")
                )
            )
        finally:
            inbox.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(spare.pid, signal.SIGKILL)
        self._finished = spare.pid
        return answer

    def _fork(self) -> _Spare:
        program_read, program_write = os.pipe()
        answer_read, answer_write = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (program_read, program_write, answer_read, answer_write):
                os.close(fd)
            raise
        if pid == 0:
            self._child(program_read, answer_write)  # never returns
        os.close(program_read)
        os.close(answer_write)
        return _Spare(pid, program_write, answer_read)

    def _child(self, program_fd: int, answer_fd: int) -> None:
        """The candidate's process: close every descriptor but its two pipes, lock itself down further, wait for
        its program, run it, write its one answer and exit (never returns to the zygote's loop)."""
        status = 0
        try:
            try:
                self.parent.close()  # coco-sql's pipes: this process never talks to coco-sql
                low, high = sorted((program_fd, answer_fd))
                os.closerange(3, low)
                os.closerange(low + 1, high)
                os.closerange(high + 1, 1 << 16)
                die_with_parent(signal.SIGKILL)
                set_candidate_limits(self.init["cpu_cap_s"])
                if self.seccomp and not install_seccomp():
                    raise RuntimeError("its seccomp filter could not be installed")
            except Exception as error:
                failed: str | None = f"the program's process could not start: {_reason(error)}"
            else:
                failed = None
            try:
                run = Channel(program_fd, -1, PYTHON_PARENT).receive()
            except EOFError:  # the zygote ended without a program for it
                raise SystemExit from None
            if run is None or run["type"] != "run":
                raise SystemExit
            if failed is not None:
                message = _error("error", failed)
            else:
                message = answer(self.worker, run["source"], run["deadline_s"])
            Channel(-1, answer_fd, PYTHON_CANDIDATE).send_bytes(self._payload(message))
        except BaseException:
            status = 70
        finally:
            os._exit(status)

    def _payload(self, message: dict[str, Any]) -> bytes:
        """The answer's frame, or an error's when it cannot be written or is over the size limit."""
        try:
            payload = dumps(message)
        except MemoryError:
            return dumps(_error("memory", "the program's outputs do not fit in the sandbox's memory bound"))
        except (TypeError, ValueError, RecursionError) as error:  # what `exact` let through
            return dumps(_error("error", f"the program's outputs cannot leave the sandbox: {_reason(error)}"))
        if len(payload) > self.init["max_answer_bytes"]:
            size = f"{len(payload) / 2**20:,.0f} MB"
            return dumps(_error("error", f"the program's outputs are {size}, over the sandbox's limit"))
        return payload


def _reap(pid: int, *, kill: bool) -> int:
    """Wait for the candidate's process (after SIGKILL with `kill`); its wait status."""
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def _reap_by(pid: int, until: float) -> int | None:
    """The wait status of a process that should end by `until`; None when it had to be killed then."""
    while time.monotonic() < until:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.005)
    _reap(pid, kill=True)
    return None


def _crashed(status: int) -> dict[str, Any]:
    """The message for a candidate's process that ended without an answer."""
    code = os.waitstatus_to_exitcode(status)
    if code == -signal.SIGKILL:  # not sent by the zygote: the kernel's out-of-memory killer
        return _error("crashed_memory", "the program's process was killed (SIGKILL)")
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    return _error("crashed", f"the program's process died ({how})")


def serve(parent: Channel) -> None:
    init = parent.receive()
    if init is None or init["type"] != "init":
        raise RuntimeError("the parent must start with init")
    layers = {"namespaces": init["namespaces"] and enter_namespaces()}
    for name in init["modules"]:
        __import__(name)
    harness: dict[str, Any] = {"__name__": "harness"}
    exec(compile(init["harness"], "<harness>", "exec"), harness)
    worker = Worker(init, harness["run"])
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, _alarm)
    layers["chroot"] = layers["namespaces"] and change_root_here()
    set_zygote_limits(init["memory_bytes"], init["max_open_files"])
    layers["seccomp"] = init["seccomp"] and install_seccomp(ZYGOTE_ALLOWED)
    disable_sockets()
    gc.collect()
    gc.freeze()  # what the zygote holds stays out of the candidates' collections: fewer copied pages
    zygote = Zygote(parent, init, worker, layers["seccomp"])
    zygote.prepare()
    parent.send({"type": "ready", "layers": layers})
    while True:
        try:
            message = parent.receive()
        except EOFError:  # the parent closed the pipe: the sandbox is closed
            zygote.close()
            return
        if message is not None and message["type"] == "run":
            parent.send_bytes(zygote.run(message["source"], message["deadline_s"]))
            zygote.prepare()


def main(argv: list[str]) -> None:
    """Started as `python -m coco_sql.sandbox.python_worker` (by `child.ChildProcess`), the process has imported
    the coco_sql package, which a candidate has no business reaching. So it moves its pipes to descriptors 3
    and 4 and replaces itself with a fresh, isolated interpreter (`-I`) that runs this file as a script and
    imports nothing but the standard library, `wire`, `messages`, `kernel_layers`, the allowed modules and the
    harness; the pipes and the process id carry over."""
    if argv[-1] != "--fresh":
        child_end(PYTHON_PARENT)
        os.execv(sys.executable, [sys.executable, "-I", os.path.abspath(__file__), "--fresh"])
    serve(Channel(CHILD_INBOX_FD, CHILD_OUTBOX_FD, PYTHON_PARENT))


if __name__ == "__main__":
    main(sys.argv)
