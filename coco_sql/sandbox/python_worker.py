"""The Python sandbox worker: a child process that holds one split's instances and runs candidate modules on them.

Started by `sandbox.python_sandbox.PythonSandbox` as `python -m coco_sql.sandbox.python_worker FD_IN FD_OUT`
(`child.ChildProcess`: an empty temporary working directory, an environment without credentials), it first
replaces itself with a fresh interpreter that imports no coco_sql (`main`). It receives
its split's instances, the task's harness and the import allow-list, locks itself down, and then runs one
candidate module per `run` message. What it blocks, layer by layer, in the order it applies them:

1. **Namespaces** (when the kernel lets this user create them; `layers["namespaces"]`): a new user, network
   and IPC namespace, entered before any thread exists. The network namespace has only a loopback interface,
   down: no address outside the process is reachable, 127.0.0.1 of the host included. In the new user
   namespace the process holds no capability over the host: it cannot raise a resource limit again.
2. **Imports, then chroot** (`layers["chroot"]`, needs 1): the allowed modules and the harness are imported
   while the file system is visible; then the process changes its root to its empty working directory, so no
   file of the machine (the pack's data files, /proc) can be opened afterwards.
3. **Kernel limits** (always): RLIMIT_DATA = the memory bound (a larger allocation raises MemoryError, reported
   as a memory error, and the parent replaces the worker), RLIMIT_FSIZE = 0 (no byte can be written to a
   file), RLIMIT_NOFILE small, RLIMIT_CORE = 0, RLIMIT_NPROC = 0 (no process or thread can be created when
   not root of the host), and RLIMIT_CPU as a backstop against a worker that outlives its parent: the parent
   replaces a worker before its CPU time could reach it.
4. **seccomp** (x86_64 Linux; `layers["seccomp"]`): a filter that makes these system calls fail with EPERM:
   creating sockets; fork, clone and exec (no new process, thread or program); signals, ptrace and
   process_vm_* (no other process can be touched); opening any file, for reading too (the pack's data files,
   /proc and so other processes' memory stay closed: the worker has opened everything it needs by then);
   creating, truncating, renaming, linking or deleting a file or changing its metadata; mounts, chroot,
   namespaces, resource limits, io_uring, bpf and keys. Neither the program nor anything it reaches can lift
   it.
5. **In-process** (always, not a boundary on its own): the socket constructors of `socket` and `_socket` raise;
   candidate modules run with an allow-list of builtins (no open, exec, eval, compile, input, getattr...)
   whose `__import__` serves only the allowed modules; the allowed modules' attributes are restored after
   every run, so one program cannot change what the next one computes.

Time: the worker raises `_Deadline` in the candidate at the deadline (SIGALRM); a program that swallows it
is killed by the parent (SIGKILL) once the deadline and its grace period have passed.

Messages are pickled tuples over two pipes (`multiprocessing.connection.Connection`):

    parent -> worker   ("init", the fields of `Init`)  then  ("run", source, deadline_s)
    worker -> parent   ("ready", layers) | ("result", outputs, failures, elapsed_ms, cpu_s)
                       ("error", kind, message, cpu_s) with kind in {"error", "timeout", "memory"}

`outputs` is `[(instance_id, output)]` for the instances the harness finished, `failures` is
`[(instance_id, one-line reason)]` for the others. Every message holds plain Python values only, so the worker
never imports coco_sql (see `main`).
"""

from __future__ import annotations

import builtins
import ctypes
import gc
import os
import resource
import signal
import struct
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from types import CodeType, ModuleType
from typing import Any


@dataclass(frozen=True)
class Init:
    """What a worker is started with: one split's instances and how to run a program on each."""

    instances: list[tuple[str, dict[str, Any]]]
    harness: str  # source of the pack's harness module: `run(entry, instance) -> output`
    entry: str  # the function of the candidate module the harness calls
    modules: tuple[str, ...]  # the modules a candidate may import
    memory_bytes: int
    max_open_files: int
    cpu_cap_s: int
    namespaces: bool  # try layer 1 (and 2)
    seccomp: bool  # install layer 4


# ------------------------------------------------------------------------------------------- layer 1 and 2

_CLONE_NEWUSER, _CLONE_NEWNET, _CLONE_NEWIPC = 0x10000000, 0x40000000, 0x08000000


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def enter_namespaces() -> bool:
    """A new user, network and IPC namespace for this process; False when the kernel refuses."""
    return _libc().unshare(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWIPC) == 0


def change_root_here() -> bool:
    """Make the (empty) working directory the root of the file system; False when not permitted."""
    try:
        os.chroot(".")
        os.chdir("/")
    except OSError:
        return False
    return True


# ------------------------------------------------------------------------------------------------ layer 3


def set_limits(init: Init) -> None:
    def limit(kind: int, soft: int, hard: int | None = None) -> None:
        resource.setrlimit(kind, (soft, soft if hard is None else hard))

    limit(resource.RLIMIT_DATA, init.memory_bytes)
    limit(resource.RLIMIT_FSIZE, 0)
    limit(resource.RLIMIT_NOFILE, init.max_open_files)
    limit(resource.RLIMIT_CORE, 0)
    limit(resource.RLIMIT_NPROC, 0)
    limit(resource.RLIMIT_CPU, init.cpu_cap_s, init.cpu_cap_s + 5)


# ------------------------------------------------------------------------------------------------ layer 4

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO, _SECCOMP_RET_KILL = 0x7FFF0000, 0x00050000, 0x80000000
_EPERM = 1
# x86_64 numbers of the system calls the filter refuses (arch/x86/entry/syscalls/syscall_64.tbl)
X86_64_DENIED: Mapping[str, tuple[int, ...]] = {
    "network": (41, 42, 43, 49, 50, 53, 288),  # socket connect accept bind listen socketpair accept4
    "processes": (56, 57, 58, 59, 322, 435),  # clone fork vfork execve execveat clone3
    "other processes": (62, 200, 234, 101, 310, 311, 424, 434, 438),  # kill tkill tgkill ptrace pidfd_*
    "opening files": (
        2,
        85,
        257,
        303,
        304,
        437,
    ),  # open creat openat name_to_handle_at open_by_handle_at openat2
    "changing files": (
        *(76, 77, 82, 83, 84, 86, 87, 88, 90, 91, 92, 93, 94, 132, 133),  # truncate ... mknod
        *(235, 258, 259, 260, 261, 263, 264, 265, 266, 268, 280, 285, 316, 452),  # utimes ... fchmodat2
        *(188, 189, 190, 197, 198, 199),  # xattrs
    ),
    "system": (
        *(155, 161, 165, 166, 272, 308, 428, 429, 430, 431, 432, 433, 442),  # mounts chroot namespaces
        *(160, 302),  # setrlimit prlimit64
        *(425, 426, 427, 321, 298, 323, 248, 249, 250, 240),  # io_uring bpf perf userfaultfd keys mq_open
        *(163, 164, 167, 168, 169, 170, 171, 175, 176, 227, 246, 313, 320),  # acct ... kexec
    ),
}

Jump = int | str  # a relative offset, or the label it is resolved to


def seccomp_program() -> bytes:
    """The filter as BPF: a foreign architecture is killed, the denied calls fail with EPERM, everything else
    is allowed."""
    denied = sorted({nr for group in X86_64_DENIED.values() for nr in group})
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    code: list[tuple[int, Jump, Jump, int]] = [
        (ld_abs, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, _AUDIT_ARCH_X86_64),
        (ret, 0, 0, _SECCOMP_RET_KILL),
        (ld_abs, 0, 0, 0),  # seccomp_data.nr
        (jge, "deny", 0, _X32_SYSCALL_BIT),  # the x32 ABI numbers: refused as a whole
        *((jeq, "deny", 0, nr) for nr in denied),
        (ret, 0, 0, _SECCOMP_RET_ALLOW),
    ]
    labels = {"deny": len(code)}
    code.append((ret, 0, 0, _SECCOMP_RET_ERRNO | _EPERM))

    def offset(here: int, target: Jump) -> int:
        if isinstance(target, int):
            return target
        jump = labels[target] - here - 1
        if not 0 <= jump <= 255:
            raise ValueError(f"seccomp jump of {jump} instructions does not fit in a byte")
        return jump

    return b"".join(
        struct.pack("=HBBI", op, offset(i, jt), offset(i, jf), k) for i, (op, jt, jf, k) in enumerate(code)
    )


def install_seccomp() -> bool:
    """Install `seccomp_program` for this (single-threaded) process; False when unsupported here."""
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        return False
    program = seccomp_program()
    buffer = ctypes.create_string_buffer(program)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = _libc()
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) == 0


# ------------------------------------------------------------------------------------------------ layer 5

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
    import _socket
    import socket

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError("network access is disabled in the sandbox")

    for module in (socket, _socket):
        for name in ("socket", "socketpair", "fromfd", "create_connection", "create_server", "SocketType"):
            if hasattr(module, name):
                setattr(module, name, refused)


class ModuleState:
    """The attributes of the allowed modules (and their submodules) as imported, put back after every run."""

    def __init__(self, roots: Iterable[str]) -> None:
        prefixes = tuple(f"{root}." for root in roots)
        self._saved = [
            (module.__dict__, dict(module.__dict__))
            for name, module in list(sys.modules.items())
            if isinstance(module, ModuleType) and (name in roots or name.startswith(prefixes))
        ]

    def restore(self) -> None:
        for live, saved in self._saved:
            if live.keys() != saved.keys() or any(live[k] is not v for k, v in saved.items()):
                live.clear()
                live.update(saved)


# --------------------------------------------------------------------------------------------- the worker


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


def _plain(value: Any) -> Any:
    """numpy scalars become Python numbers, so that the parent needs no numpy to read a result."""
    item = getattr(value, "item", None)
    return item() if callable(item) and type(value).__module__ == "numpy" else value


class Worker:
    def __init__(self, init: Init, harness_run: Callable[[Callable[..., Any], Any], Any]) -> None:
        self.init = init
        self.harness_run = harness_run
        self.builtins = restricted_builtins(frozenset(init.modules))
        self.modules = ModuleState({name.partition(".")[0] for name in init.modules})

    def run(self, source: str) -> tuple[list[tuple[str, Any]], list[tuple[str, str]]]:
        """Every instance through the harness; ProgramFailed, _Deadline and MemoryError end the whole run."""
        outputs: list[tuple[str, Any]] = []
        failures: list[tuple[str, str]] = []
        entry = self._load(source)
        for instance_id, instance in self.init.instances:
            try:
                outputs.append((instance_id, _plain(self.harness_run(entry, instance))))
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
        entry = namespace.get(self.init.entry)
        if not callable(entry):
            raise ProgramFailed(f"the program defines no function {self.init.entry!r}")
        return entry


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _alarm(signum: int, frame: object) -> None:
    raise _Deadline()


def serve(inbox: Connection, outbox: Connection) -> None:
    _, fields = inbox.recv()
    init = Init(**fields)
    layers = {"namespaces": init.namespaces and enter_namespaces()}
    for name in init.modules:
        __import__(name)
    harness: dict[str, Any] = {"__name__": "harness"}
    exec(compile(init.harness, "<harness>", "exec"), harness)
    worker = Worker(init, harness["run"])
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, _alarm)
    layers["chroot"] = layers["namespaces"] and change_root_here()
    set_limits(init)
    layers["seccomp"] = init.seccomp and install_seccomp()
    disable_sockets()
    gc.collect()
    outbox.send(("ready", layers))
    while True:
        try:
            _, source, deadline_s = inbox.recv()
        except EOFError:  # the parent closed the pipe: the sandbox is closed
            return
        outbox.send((*_answer(worker, source, deadline_s), _cpu_s()))


def _answer(worker: Worker, source: str, deadline_s: float) -> tuple[Any, ...]:
    """One run under the deadline, as the message that reports it (without the CPU time)."""
    start = time.perf_counter()
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, max(deadline_s, 1e-3))
            outputs, failures = worker.run(source)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)  # the alarm may fire in here: the outer handlers see it
        answer: tuple[Any, ...] = ("result", outputs, failures, (time.perf_counter() - start) * 1000.0)
    except _Deadline:
        answer = ("error", "timeout", f"the program exceeded its {deadline_s:g} s deadline")
    except MemoryError:
        answer = ("error", "memory", "the program ran out of memory")
    except ProgramFailed as failure:
        answer = ("error", "error", str(failure))
    except BaseException as error:  # SystemExit and the like, raised by the program itself
        answer = ("error", "error", f"the program raised {_reason(error)}")
    signal.setitimer(signal.ITIMER_REAL, 0)
    worker.modules.restore()
    gc.collect()
    return answer


def main(argv: list[str]) -> None:
    """Started as `python -m coco_sql.sandbox.python_worker FD_IN FD_OUT` (by `child.ChildProcess`), the process
    has imported the coco_sql package, whose imports start threads (a process with threads cannot enter a user
    namespace) and which a candidate has no business reaching. So it first replaces itself with a fresh,
    isolated interpreter (`-I`) that runs this file as a script and imports nothing but the standard library,
    the allowed modules and the harness; the pipes and the process id carry over."""
    if argv[-1] != "--fresh":
        os.execv(
            sys.executable, [sys.executable, "-I", os.path.abspath(__file__), argv[1], argv[2], "--fresh"]
        )
    serve(Connection(int(argv[1])), Connection(int(argv[2])))


if __name__ == "__main__":
    main(sys.argv)
