"""The frames and values that cross a child's pipe (`coco_sql.wire`, `coco_sql.messages`), over real pipes.

- values: every type a DuckDB result or a harness output holds arrives as what was sent (NaN and infinities,
  nested lists and structs, tuples, maps with non-text keys, Decimal, dates and times, bytes, UUID, numpy);
- hostile frames: an oversized length is refused before its payload is read, non-JSON, unknown tags, too-deep
  nesting, numbers past Python's digit limit and messages of the wrong shape are each a one-line WireError,
  and a pickle is never unpickled;
- framing: a frame that arrives in pieces across `until` is kept and finished by the next call.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import pickle
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from coco_sql.messages import PYTHON_ZYGOTE, SQL_WORKER, pack_column, result_rows
from coco_sql.wire import Channel, MessageType, Protocol, WireError, dumps, exact, list_of, loads, text

ECHO = Protocol.of("the test child", 1000, MessageType("note", {"text": text(100)}))


@pytest.fixture
def pipe() -> Iterator[tuple[Channel, Channel]]:
    """(reader, writer) over a real pipe."""
    read_fd, write_fd = os.pipe()
    reader, writer = Channel(read_fd, -1, ECHO), Channel(-1, write_fd, ECHO)
    yield reader, writer
    reader.close()
    writer.close()


VALUES = {
    "nan and infinities": [math.inf, -math.inf, 1.5, 0.1, -0.0, 10**30],
    "nested lists and structs": [[1, [2, [3, None]]], {"a": [{"b": "x"}], "c": None}],
    "tuple (a DuckDB ARRAY)": (1, 2, (3, "x")),
    "map with non-text keys": {1: "one", (2, 3): [4], None: True},
    "dict holding the tag key": {"\x00": "map", "v": []},
    "decimal": [decimal.Decimal("0.5"), decimal.Decimal("-1E+30"), decimal.Decimal("NaN")],
    "temporal": [
        dt.date(2020, 1, 31),
        dt.datetime(2020, 1, 31, 23, 59, 58, 123456),
        dt.datetime(2019, 12, 31, 23, 2, 3, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        dt.time(1, 2, 3, 4),
        dt.time(1, 2, 3, tzinfo=dt.UTC),
        dt.timedelta(days=-3, seconds=5, microseconds=7),
    ],
    "bytes and uuid": [b"\x00\xffab", uuid.UUID("b7f80e0f-258b-4f9a-9972-fdf64f143b50")],
    "text": ["", "\x00", "caf\u00e9 \U0001f600", "\ud800 lone surrogate", "line\nbreak"],
}


@pytest.mark.parametrize("value", VALUES.values(), ids=VALUES.keys())
def test_values_arrive_as_sent(value: object) -> None:
    back = loads(dumps(exact(value)))
    assert repr(back) == repr(value)  # equal, types of every part included (and NaN, which equals nothing)
    assert type(back) is type(value)
    if isinstance(value, list | tuple):
        assert [type(v) for v in back] == [type(v) for v in value]


def test_nan_arrives_as_nan_and_numpy_as_python() -> None:
    back = loads(dumps(exact([math.nan, np.float64(1.5), np.int64(7), np.array([[1, 2]]), np.bool_(True)])))
    assert math.isnan(back[0]) and back[1:] == [1.5, 7, [[1, 2]], True]
    assert [type(v) for v in back[1:]] == [float, int, list, bool]


def test_a_value_without_a_wire_form_is_refused_where_it_is_written() -> None:
    with pytest.raises(TypeError, match="type 'set' cannot cross"):
        dumps(exact({1, 2}))


def test_ai_columns_pack_equal_values_once() -> None:
    labels = ["joy", "anger"] * 14
    assert pack_column([labels] * 2000) == {"n": 2000, "value": labels}
    message = loads(
        dumps({"type": "ai", "udf": "f", "columns": [pack_column(["a", "b"]), pack_column([labels] * 2)]})
    )
    assert SQL_WORKER.parse(message)["columns"] == [["a", "b"], [labels, labels]]


HOSTILE_PAYLOADS = {
    "a pickle": pickle.dumps(("ready",)),
    "not JSON": b"{'type': 'ready'}",
    "an unknown tag": b'{"type":"ready","x":{"\\u0000":"object","v":"os.system"}}',
    "a tag with extra fields": b'[{"\\u0000":"decimal","v":"1","w":2}]',
    "a malformed date": b'[{"\\u0000":"date","v":"2020-13-45"}]',
    "bad base64": b'[{"\\u0000":"bytes","v":"not base64!"}]',
    "an unhashable map key": b'[{"\\u0000":"map","v":[[[1],2]]}]',
    "too deep": b"[" * 100_000 + b"]" * 100_000,
    "an integer past the digit limit": b"[" + b"9" * 5000 + b"]",
    "invalid UTF-8": b'["\xff"]',
}


@pytest.mark.parametrize("payload", HOSTILE_PAYLOADS.values(), ids=HOSTILE_PAYLOADS.keys())
def test_hostile_payloads_are_one_line_errors(payload: bytes) -> None:
    with pytest.raises(WireError) as error:
        loads(payload)
    assert "\n" not in str(error.value)


SHAPES = {
    "no type": {"columns": []},
    "unknown type": {"type": "exec", "code": "x"},
    "missing field": {"type": "types"},
    "extra field": {"type": "types", "kinds": [], "also": 1},
    "wrong kind of field": {"type": "types", "kinds": "SELECT"},
    "a bool for a number": {"type": "result", "columns": [], "n_rows": 0, "data": [], "elapsed_ms": True},
    "unknown error kind": {"type": "error", "kind": "exec", "message": "x"},
    "packed column too long": {"type": "ai", "udf": "f", "columns": [{"n": 10**9, "value": "x"}]},
    "columns of different lengths": {"type": "ai", "udf": "f", "columns": [["a"], ["a", "b"]]},
}


@pytest.mark.parametrize("message", SHAPES.values(), ids=SHAPES.keys())
def test_messages_of_the_wrong_shape_are_refused(message: dict[str, object]) -> None:
    with pytest.raises(WireError, match="the sandbox process sent") as error:
        SQL_WORKER.parse(loads(dumps(message)))
    assert "\n" not in str(error.value)


def test_a_result_whose_columns_do_not_line_up_is_refused() -> None:
    good = SQL_WORKER.parse(
        {"type": "result", "columns": ["id", "x"], "n_rows": 2, "data": [["a", "b"], [1, 2]], "elapsed_ms": 1}
    )
    assert result_rows(good) == [("a", 1), ("b", 2)]
    for data in ([["a", "b"]], [["a", "b"], [1]], [["a"], [1]]):
        bad = SQL_WORKER.parse(
            {"type": "result", "columns": ["id", "x"], "n_rows": 2, "data": data, "elapsed_ms": 1}
        )
        with pytest.raises(WireError, match="do not hold 2 rows"):
            result_rows(bad)


def test_error_text_is_made_one_line() -> None:
    message = PYTHON_ZYGOTE.parse({"type": "error", "kind": "error", "message": "a\nb\r\n  c" + "x" * 5000})
    assert message["message"].startswith("a b c") and "\n" not in message["message"]
    assert len(message["message"]) == 2000


def test_an_oversized_frame_is_refused_before_its_payload_is_read(pipe: tuple[Channel, Channel]) -> None:
    reader, writer = pipe
    os.write(writer.write_fd, (2**31).to_bytes(4, "big") + b"x" * 10)
    with pytest.raises(WireError, match="2,147,483,648 bytes, over the limit of 1,000"):
        reader.receive(time.monotonic() + 5)
    assert os.read(reader.read_fd, 100) == b"x" * 10  # the payload was left unread


def test_a_frame_in_pieces_is_finished_by_the_next_call(pipe: tuple[Channel, Channel]) -> None:
    reader, writer = pipe
    payload = dumps({"type": "note", "text": "0123456789"})
    frame = len(payload).to_bytes(4, "big") + payload
    os.write(writer.write_fd, frame[:2])
    assert reader.receive(time.monotonic() + 0.05) is None  # half a header
    os.write(writer.write_fd, frame[2:20])
    assert reader.receive(time.monotonic() + 0.05) is None  # part of the payload
    later = threading.Timer(0.1, lambda: os.write(writer.write_fd, frame[20:]))
    later.start()
    assert reader.receive(time.monotonic() + 5) == {"type": "note", "text": "0123456789"}
    later.join()


def test_a_closed_pipe_is_eof_and_a_big_frame_crosses(pipe: tuple[Channel, Channel]) -> None:
    read_fd, write_fd = os.pipe()
    big = Protocol.of("the test child", 2**30, MessageType("rows", {"values": list_of(text(100), 10**7)}))
    reader, writer = Channel(read_fd, -1, big), Channel(-1, write_fd, big)
    values = [f"row {i}" for i in range(300_000)]  # about 3.6 MB: more than a pipe holds
    sender = threading.Thread(target=writer.send, args=({"type": "rows", "values": values},))
    sender.start()
    assert reader.receive(time.monotonic() + 30) == {"type": "rows", "values": values}
    sender.join()
    writer.close()
    with pytest.raises(EOFError):
        reader.receive(time.monotonic() + 5)
    reader.close()
    reader.close()  # closing twice closes nothing else


def test_no_pickle_is_loaded_by_a_channel(pipe: tuple[Channel, Channel], tmp_path: Path) -> None:
    """A crafted pickle whose loading would create a file: the channel refuses it and the file never appears."""
    reader, writer = pipe
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self) -> tuple[object, tuple[str, str]]:
            return (open, (str(marker), "w"))

    writer.send_bytes(pickle.dumps(Exploit()))
    with pytest.raises(WireError, match="not valid JSON"):
        reader.receive(time.monotonic() + 5)
    assert not marker.exists()
