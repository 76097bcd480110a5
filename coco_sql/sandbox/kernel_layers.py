"""The kernel layers of the Python sandbox (`sandbox.python_worker`): namespaces, chroot, resource limits and
seccomp filters. Each is applied by the process itself and cannot be lifted by it afterwards.

Two processes apply them: the zygote (which holds the imports and instances and never runs a candidate) and, on
top of what it inherits from the zygote, the process forked for one candidate. seccomp filters stack: the
zygote's filter lets it fork, kill the candidate's process at its deadline and lower that process's limits;
the candidate's own filter, installed after, refuses those too. Imports only the standard library.
"""

from __future__ import annotations

import ctypes
import os
import resource
import struct
import sys
from collections.abc import Mapping

# ------------------------------------------------------------------------------------------- layer 1 and 2

_CLONE_NEWUSER, _CLONE_NEWNET, _CLONE_NEWIPC = 0x10000000, 0x40000000, 0x08000000
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 1, 38, 22, 2


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


def die_with_parent(signal_number: int) -> None:
    """The kernel sends this process `signal_number` when its parent (a single-threaded zygote) ends."""
    _libc().prctl(_PR_SET_PDEATHSIG, signal_number, 0, 0, 0)


# ------------------------------------------------------------------------------------------------ layer 3


def _limit(kind: int, soft: int, hard: int | None = None) -> None:
    resource.setrlimit(kind, (soft, soft if hard is None else hard))


def set_zygote_limits(memory_bytes: int, max_open_files: int) -> None:
    """What the zygote and every candidate's process share: the memory bound, no file writes, few files, no
    core files."""
    _limit(resource.RLIMIT_DATA, memory_bytes)
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_NOFILE, max_open_files)
    _limit(resource.RLIMIT_CORE, 0)


def set_candidate_limits(cpu_cap_s: int) -> None:
    """What only a candidate's process gets: no process or thread of its own (when not root of the host), and
    a CPU cap as a backstop should it outlive the zygote's SIGKILL."""
    _limit(resource.RLIMIT_NPROC, 0)
    _limit(resource.RLIMIT_CPU, cpu_cap_s, cpu_cap_s + 5)


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
# what the zygote's own filter lets through: clone, fork and clone3 (one process per candidate), kill (SIGKILL to
# that process at its deadline), setrlimit and prlimit64 (its limits, set before its own filter)
ZYGOTE_ALLOWED: frozenset[int] = frozenset({56, 57, 435, 62, 160, 302})

Jump = int | str  # a relative offset, or the label it is resolved to

_CLONE, _CLONE3, _PRLIMIT64 = 56, 435, 302
_CLONE_THREAD = 0x00010000
# every CLONE_NEW* flag: a thread may not bring a namespace of its own (NEWTIME, NEWNS, NEWCGROUP ... NEWNET)
_CLONE_NAMESPACES = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
_CLONE_NAMESPACES |= 0x20000000 | 0x40000000
_ENOSYS = 38
_ARG0_LOW, _ARG2_LOW, _ARG2_HIGH = 16, 32, 36  # seccomp_data.args[i] at 16 + 8 i, little-endian halves


def seccomp_program(allowed: frozenset[int] = frozenset(), *, threads: bool = False) -> bytes:
    """The filter as BPF: a foreign architecture is killed, the denied calls (but `allowed`) fail with EPERM,
    everything else is allowed.

    `threads` (a process that must start threads: dbt's thread pool, DuckDB's): clone is allowed only when it
    makes a thread of this process (CLONE_THREAD set, no CLONE_NEW* flag), so fork stays refused; clone3 fails
    with ENOSYS, since its flags sit in memory the filter cannot read, and glibc then falls back to clone; and
    prlimit64 may read a limit (glibc and DuckDB do) but not set one."""
    denied = sorted({nr for group in X86_64_DENIED.values() for nr in group} - allowed)
    ld_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    special: list[tuple[int, Jump, Jump, int]] = []
    if threads:
        denied = [nr for nr in denied if nr not in (_CLONE, _CLONE3, _PRLIMIT64)]
        special = [(jeq, "clone", 0, _CLONE), (jeq, "enosys", 0, _CLONE3), (jeq, "prlimit", 0, _PRLIMIT64)]
    code: list[tuple[int, Jump, Jump, int]] = [
        (ld_abs, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, _AUDIT_ARCH_X86_64),
        (ret, 0, 0, _SECCOMP_RET_KILL),
        (ld_abs, 0, 0, 0),  # seccomp_data.nr
        (jge, "deny", 0, _X32_SYSCALL_BIT),  # the x32 ABI numbers: refused as a whole
        *special,
        *((jeq, "deny", 0, nr) for nr in denied),
        (ret, 0, 0, _SECCOMP_RET_ALLOW),
    ]
    labels: dict[str, int] = {}
    if threads:
        labels["clone"] = len(code)
        code += [
            (ld_abs, 0, 0, _ARG0_LOW),  # clone's flags
            (jset, "deny", 0, _CLONE_NAMESPACES),
            (jset, "allow", "deny", _CLONE_THREAD),
        ]
        labels["prlimit"] = len(code)
        code += [
            (ld_abs, 0, 0, _ARG2_LOW),  # the new limit: NULL to only read
            (jeq, 0, "deny", 0),
            (ld_abs, 0, 0, _ARG2_HIGH),
            (jeq, "allow", "deny", 0),
        ]
        labels["enosys"] = len(code)
        code.append((ret, 0, 0, _SECCOMP_RET_ERRNO | _ENOSYS))
        labels["allow"] = len(code)
        code.append((ret, 0, 0, _SECCOMP_RET_ALLOW))
    labels["deny"] = len(code)
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


def install_seccomp(allowed: frozenset[int] = frozenset(), *, threads: bool = False) -> bool:
    """Install `seccomp_program(allowed, threads=threads)` for this (single-threaded) process, on top of any
    filter it already has; False when unsupported here."""
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        return False
    program = seccomp_program(allowed, threads=threads)
    buffer = ctypes.create_string_buffer(program)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0
