"""A split's table as it crosses to a sandbox worker: an Arrow IPC stream, never a pickle.

The parent converts the frame with DuckDB itself (`from_df(...).to_arrow_table()`), so the worker's DuckDB sees exactly
the column types it would have inferred from the pandas frame, and the worker reads the stream with pyarrow
(plain data: no code runs while it is decoded) and registers the Arrow table as it is."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd  # the parent's side only: the worker reads the stream without pandas


class _Converter:
    """This process's DuckDB for typing frames: opening a database costs ~40 ms of CPU (DuckDB 1.x-2.0), a
    cursor on an open one microseconds, and a sandbox converts its tables each time it is made."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = -1
        self._database: duckdb.DuckDBPyConnection | None = None

    def cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._database is None or self._owner != os.getpid():  # a forked copy opens its own
                self._database, self._owner = duckdb.connect(), os.getpid()
            return self._database.cursor()


_CONVERTER = _Converter()


def table_bytes(rows: pd.DataFrame) -> bytes:
    """`rows` as one Arrow IPC stream, typed as DuckDB types the frame."""
    with _CONVERTER.cursor() as con:
        table = con.from_df(rows).to_arrow_table()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def table_from(data: bytes) -> pa.Table:
    """The Arrow table of one `table_bytes` stream."""
    with pa.ipc.open_stream(pa.py_buffer(data)) as reader:
        return reader.read_all()
