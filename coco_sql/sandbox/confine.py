"""File-system confinement for a sandbox worker that must keep opening files: a mount-namespace jail and Landlock.

The Python sandbox refuses every open (seccomp) and changes its root to an empty folder. A worker that runs dbt
cannot: each dbt invocation re-reads ~230 built-in macro files, lists every `sys.path` folder and writes its
compiled SQL and partial-parse state (`languages.dbt.runner` lists where dbt writes). So its opens stay possible, but
only beneath a few folders, by two independent layers, each applied by the process itself while it is still
single-threaded (both bind the threads it starts later), and neither liftable afterwards:

- **jail** (`enter_jail`): a new user, mount, network and IPC namespace; a tmpfs root holding read-only bind
  mounts of exactly the folders given (at their own paths, so imported modules keep their `__file__`) and a
  size-bounded tmpfs work folder (`JAIL_WORK`); `pivot_root` into it and detach the old root, so no other file
  of the machine has a name; then every capability is dropped. No /proc, no /sys, no /dev beyond what the
  process already holds open.
- **landlock** (`restrict_paths`, Linux >= 5.13; ABI 4 adds TCP, 6 adds signal and abstract-socket scoping):
  reads allowed only beneath the read-only folders, reads and writes only beneath the work folder; TCP bind
  and connect refused; no signal to, and no abstract Unix socket of, a process outside the domain.

Each returns False where the kernel or this user may not use it; the caller reports which layers hold. Imports
only the standard library.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable, Sequence

from coco_sql.sandbox.kernel_layers import _CLONE_NEWIPC, _CLONE_NEWNET, _CLONE_NEWUSER, _libc

JAIL_WORK = "/scratch"  # the work folder's path inside the jail

_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_SYS_PIVOT_ROOT, _SYS_MOUNT_SETATTR, _AT_RECURSIVE = 155, 442, 0x8000
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
_SYS_CAPSET, _CAP_VERSION_3 = 126, 0x20080522
_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _CAP_LAST = 24, 38, 63


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


# --------------------------------------------------------------------------------------------- the jail


def enter_jail(read_only: Sequence[str], staging: str, work_bytes: int) -> bool:
    """Enter new user, mount, network and IPC namespaces and pivot into a root that holds only `read_only`
    (bound read-only at their own paths; nested ones are covered by their parent) and `JAIL_WORK` (a tmpfs of
    `work_bytes`, the current directory afterwards). `staging`: an empty folder to build the root on. False when
    the kernel refuses the namespaces; OSError when the jail fails half-built (the caller must exit then)."""
    uid, gid = os.getuid(), os.getgid()
    libc = _libc()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC) != 0:
        return False
    _write("/proc/self/setgroups", "deny")  # the same ids inside: files keep their owners
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making mounts private")
    root = staging.encode()
    _check(libc.mount(b"tmpfs", root, b"tmpfs", _MS_NOSUID | _MS_NODEV, b"size=1m,mode=0755"), "root tmpfs")
    for folder in _outermost(read_only):
        target = root + folder.encode()
        os.makedirs(target, exist_ok=True)
        _check(libc.mount(folder.encode(), target, None, _MS_BIND | _MS_REC, None), f"binding {folder}")
        _read_only(libc, target, recursive=True)
    work = root + JAIL_WORK.encode()
    os.makedirs(work)
    options = f"size={work_bytes},nr_inodes=4096,mode=0700".encode()
    _check(libc.mount(b"tmpfs", work, b"tmpfs", _MS_NOSUID | _MS_NODEV, options), "work tmpfs")
    os.chdir(root)
    _check(libc.syscall(_SYS_PIVOT_ROOT, b".", b"."), "pivot_root")  # the old root now sits under the new
    _check(libc.umount2(b".", _MNT_DETACH), "detaching the old root")
    os.chdir("/")
    _read_only(libc, b"/", recursive=False)
    os.chdir(JAIL_WORK)
    drop_capabilities()
    return True


def _write(path: str, text: str) -> None:
    with open(path, "w") as stream:
        stream.write(text)


def _outermost(folders: Iterable[str]) -> list[str]:
    """The existing folders of `folders` (absolute, as written: a module's `__file__` keeps its symbolic links),
    without those inside another one."""
    real = sorted({os.path.abspath(f) for f in folders if os.path.isdir(f)})
    kept: list[str] = []
    for folder in real:
        if not any(folder == k or folder.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(folder)
    return kept


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _read_only(libc: ctypes.CDLL, path: bytes, *, recursive: bool) -> None:
    """Make the mount at `path` (and, `recursive`, those beneath) read-only, without setuid or devices."""
    attr = _MountAttr(_MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV, 0, 0, 0)
    flags = _AT_RECURSIVE if recursive else 0
    result = libc.syscall(_SYS_MOUNT_SETATTR, -100, path, flags, ctypes.byref(attr), ctypes.sizeof(attr))
    _check(result, f"making {path.decode()} read-only")


def drop_capabilities() -> None:
    """No capability left, in any set, and none that an exec could bring back."""
    libc = _libc()
    for cap in range(_CAP_LAST + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the kernel's last capability: harmless
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.syscall(_SYS_CAPSET, header, data), "dropping capabilities")


# ---------------------------------------------------------------------------------------------- landlock

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION, _RULE_PATH_BENEATH = 1, 1
_O_PATH = 0o10000000
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_REMOVE_DIR, _FS_REMOVE_FILE, _FS_MAKE_DIR, _FS_MAKE_REG = 1 << 4, 1 << 5, 1 << 7, 1 << 8
_FS_V1 = (1 << 13) - 1  # execute ... make_sym
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_READ = _FS_READ_FILE | _FS_READ_DIR
_READ_WRITE = _READ | _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE_DIR | _FS_MAKE_REG


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or disabled."""
    version = _libc().syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def restrict_paths(
    read_only: Iterable[str], read_write: Iterable[str], read_files: Iterable[str] = ()
) -> int:
    """Restrict this process (and the threads it starts later) to reading beneath the folders `read_only`,
    reading the files `read_files` (those that exist) and reading and writing beneath `read_write`, with every
    other file access, TCP bind and connect, and (ABI >= 6) signals and abstract Unix sockets outside the domain
    refused. Sets no_new_privs. The ABI version used; 0 when Landlock is not available here."""
    abi = landlock_abi()
    if abi < 1:
        return 0
    handled = _FS_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    handled |= _FS_IOCTL_DEV if abi >= 5 else 0
    net = _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = _RulesetAttr(handled, net, scoped)
    size = ctypes.sizeof(ctypes.c_uint64) * (3 if abi >= 6 else 2 if abi >= 4 else 1)  # the fields it knows
    libc = _libc()
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), size, 0)
    _check(0 if ruleset >= 0 else -1, "creating the Landlock ruleset")
    try:
        writable = _READ_WRITE | (_FS_TRUNCATE if abi >= 3 else 0)
        rules = [(f, _READ) for f in _outermost(read_only)] + [(f, writable) for f in _outermost(read_write)]
        rules += [(f, _FS_READ_FILE) for f in read_files if os.path.isfile(f)]
        for folder, access in rules:
            fd = os.open(folder, _O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneath(access & handled, fd)
                _check(
                    libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0), folder
                )
            finally:
                os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi
