"""What crosses a pipe between coco-sql and a child process: length-prefixed JSON frames, read as hostile data.

A child process may be running a hostile candidate (the sandboxes) or crash-prone native code (the local model
host), so nothing it sends is trusted: no pickle, no eval, no object built from a name it chose. A frame is a
4-byte big-endian length and that many bytes of JSON. The reader refuses a length over its protocol's limit
before it reads the payload, decodes the JSON with `json.loads` (which builds only dicts, lists, strings,
numbers, booleans and None), turns a small fixed set of tagged objects back into values (below), and then
checks the message against the schema of its type (`Protocol.parse`): exactly the fields of that type, each of
the expected kind and size. Anything else is a `WireError`, whose message is one line.

Values (`exact`, `dumps`): JSON holds str, int, float, bool, None, lists and objects with text keys; NaN and
+-inf travel as Python's json module writes them (`NaN`, `Infinity`). Everything else travels as an object
`{"\\u0000": tag, "v": payload}`: tuple, a dict whose keys are not all text (a DuckDB MAP) or that holds the tag
key itself, Decimal, date, time, datetime (with its UTC offset), timedelta, bytes (base64) and UUID; numpy
scalars and arrays become their Python values. `dumps` writes tuples as lists and tags only what the C encoder
cannot write: callers whose values are known to be plain (text, numbers, lists of them) pay nothing more, and
the others pass their values through `exact` first.

This module imports only the standard library: the Python sandbox's zygote, a fresh interpreter that imports
nothing of coco-sql but this, `messages` and `sandbox.kernel_layers`, loads it too.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import decimal
import json
import math
import os
import select
import struct
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

TAG = "\x00"
_HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 2**32 - 1  # what a 4-byte length can say
_CHUNK_BYTES = 2**20
_SCALARS = (str, int, float, bool, type(None))


class WireError(Exception):
    """A frame or message that breaks the protocol: oversized, not JSON, or not of the expected shape."""


# ------------------------------------------------------------------------------------------------- values


def exact(value: Any) -> Any:
    """`value` in a form `dumps` writes without loss: tuples and dicts that JSON cannot hold are tagged."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list:
        return value if all(type(v) in _SCALARS for v in value) else [exact(v) for v in value]
    if kind is tuple:
        return {TAG: "tuple", "v": [exact(v) for v in value]}
    if kind is dict:
        if TAG not in value and all(type(k) is str for k in value):
            return {k: exact(v) for k, v in value.items()}
        return {TAG: "map", "v": [[exact(k), exact(v)] for k, v in value.items()]}
    return _tagged(value)


def _tagged(value: Any) -> Any:
    """The tagged form of a value JSON has no type for (also `dumps`' hook for what its encoder cannot write)."""
    if isinstance(value, decimal.Decimal):
        return {TAG: "decimal", "v": str(value)}
    if isinstance(value, dt.datetime):  # before date: a datetime is a date
        return {TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {TAG: "date", "v": value.isoformat()}
    if isinstance(value, dt.time):
        return {TAG: "time", "v": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {TAG: "timedelta", "v": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, bytes | bytearray | memoryview):
        return {TAG: "bytes", "v": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, uuid.UUID):
        return {TAG: "uuid", "v": str(value)}
    if type(value).__module__ == "numpy" and callable(getattr(value, "tolist", None)):
        return exact(value.tolist())
    raise TypeError(f"a value of type {type(value).__name__!r} cannot cross a process boundary")


def _pairs(payload: Any) -> dict[Any, Any]:
    if not isinstance(payload, list) or not all(isinstance(p, list) and len(p) == 2 for p in payload):
        raise WireError("a map is not a list of key-value pairs")
    return {key: value for key, value in payload}


_UNTAG: dict[str, tuple[type, Callable[[Any], Any]]] = {
    "tuple": (list, tuple),
    "map": (list, _pairs),
    "decimal": (str, decimal.Decimal),
    "datetime": (str, dt.datetime.fromisoformat),
    "date": (str, dt.date.fromisoformat),
    "time": (str, dt.time.fromisoformat),
    "timedelta": (list, lambda v: _timedelta(*v)),
    "bytes": (str, lambda v: base64.b64decode(v, validate=True)),
    "uuid": (str, uuid.UUID),
}


def _timedelta(*fields: Any) -> dt.timedelta:
    if len(fields) != 3 or any(type(f) is not int for f in fields):
        raise WireError("a malformed timedelta")
    return dt.timedelta(*fields)


def _untag(obj: dict[str, Any]) -> Any:
    """json.loads' object hook: a tagged object becomes its value; every other object stays a dict."""
    if TAG not in obj:
        return obj
    tag = obj[TAG]
    if len(obj) != 2 or "v" not in obj or tag not in _UNTAG:
        raise WireError(f"unknown tagged value {str(tag)[:40]!r}")
    kind, build = _UNTAG[tag]
    payload = obj["v"]
    if type(payload) is not kind:
        raise WireError(f"a malformed {tag}")
    return build(payload)


def dumps(message: Any) -> bytes:
    """JSON bytes of `message` (tuples become lists; see `exact` for what keeps its type)."""
    return json.dumps(message, separators=(",", ":"), default=_tagged).encode("ascii")


def loads(payload: bytes | bytearray) -> Any:
    """The value of one frame's JSON; WireError for anything that is not valid JSON of known values."""
    try:
        return json.loads(payload, object_hook=_untag)
    except WireError:
        raise
    except (ValueError, TypeError, ArithmeticError, RecursionError, OverflowError) as error:
        # not JSON, a number past int's digit limit, nesting too deep, a bad date, decimal or base64
        raise WireError(f"a message that is not valid JSON of known values ({_one_line(error)})") from None


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())}"[:200]


# ------------------------------------------------------------------------------------------------ schemas

Check = Callable[[Any, str], Any]
"""Checks one field (`where` names it in the error) and returns the value to use."""


def anything(value: Any, where: str) -> Any:
    """Any decoded value: `loads` builds only plain values and the tagged types above."""
    return value


def text(limit: int) -> Check:
    def check(value: Any, where: str) -> str:
        if type(value) is not str or len(value) > limit:
            raise WireError(f"{where} is not a text of at most {limit:,} characters")
        return value

    return check


def line(limit: int) -> Check:
    """A text made one line (whitespace runs become one space) and cut at `limit`: shown to users as is."""

    def check(value: Any, where: str) -> str:
        if type(value) is not str:
            raise WireError(f"{where} is not a text")
        return " ".join(value.split())[:limit]

    return check


def integer(low: int, high: int) -> Check:
    def check(value: Any, where: str) -> int:
        if type(value) is not int or not low <= value <= high:
            raise WireError(f"{where} is not an integer in [{low}, {high}]")
        return value

    return check


def number(value: Any, where: str) -> float:
    if type(value) not in (int, float):
        raise WireError(f"{where} is not a number")
    return float(value)


def flag(value: Any, where: str) -> bool:
    if type(value) is not bool:
        raise WireError(f"{where} is not true or false")
    return value


def choice(*options: str) -> Check:
    def check(value: Any, where: str) -> str:
        if value not in options or type(value) is not str:
            raise WireError(f"{where} is not one of {', '.join(options)}")
        return value

    return check


def list_of(item: Check, limit: int) -> Check:
    """A list of at most `limit` items, each checked (`anything` items are not visited: a result's values)."""

    def check(value: Any, where: str) -> list[Any]:
        if type(value) is not list or len(value) > limit:
            raise WireError(f"{where} is not a list of at most {limit:,} items")
        if item is anything:
            return value
        return [item(v, f"{where}[{k}]") for k, v in enumerate(value)]

    return check


def nullable(check: Check) -> Check:
    """None, or a value `check` accepts."""

    def checked(value: Any, where: str) -> Any:
        return None if value is None else check(value, where)

    return checked


def pair(first: Check, second: Check) -> Check:
    def check(value: Any, where: str) -> tuple[Any, Any]:
        if type(value) not in (list, tuple) or len(value) != 2:
            raise WireError(f"{where} is not a pair")
        return first(value[0], f"{where}[0]"), second(value[1], f"{where}[1]")

    return check


def record(fields: Mapping[str, Check]) -> Check:
    """An object with exactly `fields`."""

    def check(value: Any, where: str) -> dict[str, Any]:
        if type(value) is not dict or value.keys() != fields.keys():
            raise WireError(f"{where} is not an object with the fields {', '.join(fields)}")
        return {name: fields[name](value[name], f"{where}.{name}") for name in fields}

    return check


def json_object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise WireError(f"{where} is not an object")
    return value


@dataclass(frozen=True)
class MessageType:
    """One kind of message: `{"type": name, field: value...}` with exactly these fields."""

    name: str
    fields: Mapping[str, Check]


@dataclass(frozen=True)
class Protocol:
    """What one side of a pipe may send: its message types, and the largest frame the reader accepts."""

    sender: str  # 'the sandbox process', ... (for error messages)
    types: Mapping[str, MessageType]
    max_bytes: int

    @classmethod
    def of(cls, sender: str, max_bytes: int, *types: MessageType) -> Protocol:
        return cls(sender, {t.name: t for t in types}, max_bytes)

    def decode(self, payload: bytes | bytearray) -> dict[str, Any]:
        """One frame's payload as a checked message; WireError naming the sender and what is wrong."""
        try:
            message = loads(payload)
        except WireError as error:
            raise WireError(f"{self.sender} sent {error}") from None
        return self.parse(message)

    def parse(self, message: Any) -> dict[str, Any]:
        """The message, checked against its type; WireError naming what is wrong."""
        kind = message.get("type") if type(message) is dict else None
        spec = self.types.get(kind) if type(kind) is str else None
        if spec is None:
            raise WireError(f"{self.sender} sent a message of no known type ({str(kind)[:40]!r})")
        if message.keys() - {"type"} != spec.fields.keys():
            raise WireError(
                f"{self.sender} sent a {kind!r} message whose fields are not {', '.join(spec.fields)}"
            )
        try:
            return {"type": kind} | {name: check(message[name], name) for name, check in spec.fields.items()}
        except WireError as error:
            raise WireError(f"{self.sender} sent a malformed {kind!r} message: {error}") from None


# ------------------------------------------------------------------------------------------------ framing


class Channel:
    """One end of a pair of pipes: frames out on `write_fd`, frames in on `read_fd`, parsed by `receives`.

    `receive` waits until a whole frame has arrived or `until` (time.monotonic) passes; a frame that is still
    arriving then is kept, and the next call goes on reading it. EOFError when the other side closed its end.
    """

    def __init__(self, read_fd: int, write_fd: int, receives: Protocol) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self.receives = receives
        self._header = bytearray()
        self._body: bytearray | None = None
        self._size = 0

    def send(self, message: Mapping[str, Any]) -> None:
        self.send_bytes(dumps(message))

    def send_bytes(self, payload: bytes) -> None:
        if len(payload) > MAX_FRAME_BYTES:
            raise WireError(f"a message of {len(payload):,} bytes does not fit in a frame")
        for part in (_HEADER.pack(len(payload)), payload):
            data = memoryview(part)
            while data:
                data = data[os.write(self.write_fd, data) :]

    def receive(self, until: float | None = None) -> dict[str, Any] | None:
        """The next message, checked against `receives`, or None when `until` passes first."""
        payload = self.receive_bytes(until)
        return None if payload is None else self.receives.decode(payload)

    def receive_bytes(self, until: float | None = None, *, limit: int | None = None) -> bytearray | None:
        """The next frame's payload as it is (a table the parent sends), or None when `until` passes first."""
        limit = self.receives.max_bytes if limit is None else limit
        while len(self._header) < _HEADER.size:
            chunk = self._read(_HEADER.size - len(self._header), until)
            if chunk is None:
                return None
            self._header += chunk
        if self._body is None:
            (size,) = _HEADER.unpack(self._header)
            if size > limit:
                raise WireError(
                    f"{self.receives.sender} sent a message of {size:,} bytes, over the limit of {limit:,}"
                )
            self._size, self._body = size, bytearray()  # grows as data arrives, not as the header says
        while len(self._body) < self._size:
            chunk = self._read(min(self._size - len(self._body), _CHUNK_BYTES), until)
            if chunk is None:
                return None
            self._body += chunk
        payload, self._header, self._body = self._body, bytearray(), None
        return payload

    def _read(self, n: int, until: float | None) -> bytes | None:
        if not _ready(self.read_fd, until):
            return None
        chunk = os.read(self.read_fd, n)
        if not chunk:
            raise EOFError
        return chunk

    def close(self) -> None:
        """Close both ends (once: a descriptor number closed twice may by then be another file's)."""
        for fd in {self.read_fd, self.write_fd} - {-1}:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.read_fd = self.write_fd = -1


def _ready(fd: int, until: float | None) -> bool:
    """Whether `fd` has data (or its writer closed it) before `until`; None waits for ever."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        timeout = None if until is None else max(0, math.ceil((until - time.monotonic()) * 1000))
        if poller.poll(timeout):
            return True
        if until is not None and time.monotonic() >= until:
            return False


# ------------------------------------------------------------------------------------------- a child's end

CHILD_INBOX_FD, CHILD_OUTBOX_FD = 3, 4


def child_end(receives: Protocol) -> Channel:
    """In a process started by `child.ChildProcess`: its pipes, moved from stdin and stdout (where the parent
    put them, so that no descriptor number travels in `sys.argv`) to the fixed descriptors 3 and 4; stdin and
    stdout become /dev/null, so that nothing a library prints can reach the pipe."""
    os.dup2(0, CHILD_INBOX_FD)
    os.dup2(1, CHILD_OUTBOX_FD)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    return Channel(CHILD_INBOX_FD, CHILD_OUTBOX_FD, receives)
