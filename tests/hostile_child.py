"""A child process that breaks its protocol on purpose, started in place of a sandbox worker or the model host
(tests/test_sandbox.py, tests/test_dbt_sandbox.py): `python -m tests.hostile_child MODE MARKER`.

It answers the parent's first message (or, for the `*-result` modes, its first `run` after a proper `ready`;
the dbt sandbox's `ready` for `*-dbt-result`) with what MODE names: a crafted pickle whose loading would create the file MARKER, a frame whose length is
2 GB, a JSON message of the wrong shape, or a message of a type that does not belong there. It speaks either
pipe convention: pipes at descriptors named in its argv (how children were started before issue 25), or on
stdin and stdout (now); and the matching framing (both are a 4-byte big-endian length and a payload).
Modes `sleep` and `spin` are slow starts instead (`slow`).
"""

from __future__ import annotations

import json
import os
import pickle
import sys


class Exploit:
    """Unpickling it opens MARKER for writing: the file appears if, and only if, the parent unpickled it."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.marker, "w"))


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def read_frame(fd: int) -> bytes:
    header = b""
    while len(header) < 4:
        chunk = os.read(fd, 4 - len(header))
        if not chunk:
            raise SystemExit(0)
        header += chunk
    size, payload = int.from_bytes(header, "big"), b""
    while len(payload) < size:
        chunk = os.read(fd, size - len(payload))
        if not chunk:
            raise SystemExit(0)
        payload += chunk
    return payload


def slow(mode: str) -> None:
    """`sleep`: answer `ready` after 3 s of sleep (no CPU, like a start on a loaded machine); `spin`: burn CPU
    and never answer (a start that hangs in a loop)."""
    import time

    if mode == "sleep":
        time.sleep(3.0)
        os.write(1, frame(json.dumps({"type": "ready"}).encode()))
    while True:
        if mode == "spin":
            continue
        read_frame(0)


def main(argv: list[str]) -> None:
    mode, marker = argv[-2:]
    if mode in ("sleep", "spin"):
        slow(mode)
    old_convention = len(argv) >= 5 and argv[1].isdigit()
    inbox, outbox = (int(argv[1]), int(argv[2])) if old_convention else (0, 1)
    hostile = {
        "pickle": frame(pickle.dumps(Exploit(marker))),
        "oversized": (2**31 - 1).to_bytes(4, "big"),
        "malformed": frame(json.dumps({"type": "result", "columns": "id", "rows": 1}).encode()),
        "foreign": frame(json.dumps({"type": "ok", "completion": {}}).encode()),
    }[mode.removesuffix("-result").removesuffix("-dbt")]
    if mode.endswith("-result"):
        proper: dict[str, object] = {"type": "ready"}
        if "-dbt" in mode:  # the dbt sandbox's ready names the kernel layers its worker got
            proper["layers"] = dict.fromkeys(("namespaces", "jail", "landlock", "seccomp"), True)
        ready = pickle.dumps(("ready",)) if old_convention else json.dumps(proper).encode()
        os.write(outbox, frame(ready))
        while True:  # the init (and its tables), then the first query
            payload = read_frame(inbox)
            if b"run" in payload[:40]:
                break
    os.write(outbox, hostile)
    while True:  # read on until the parent closes the pipe (or kills this process)
        read_frame(inbox)


if __name__ == "__main__":
    main(sys.argv)
