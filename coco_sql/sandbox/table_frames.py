"""A split's table as it crosses to a sandbox worker: an Arrow IPC stream, never a pickle.

The parent converts the frame with DuckDB itself (`from_df(...).to_arrow_table()`), so the worker's DuckDB sees exactly
the column types it would have inferred from the pandas frame, and the worker reads the stream with pyarrow
(plain data: no code runs while it is decoded) and registers the Arrow table as it is."""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd  # the parent's side only: the worker reads the stream without pandas


def table_bytes(rows: pd.DataFrame) -> bytes:
    """`rows` as one Arrow IPC stream, typed as DuckDB types the frame."""
    with duckdb.connect() as con:
        table = con.from_df(rows).to_arrow_table()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def table_from(data: bytes) -> pa.Table:
    """The Arrow table of one `table_bytes` stream."""
    with pa.ipc.open_stream(pa.py_buffer(data)) as reader:
        return reader.read_all()
