"""Register the AI functions in a DuckDB connection as arrow-vectorized Python UDFs.

The validator's binder (`sqlkit.ai_binding`) rewrites every AI call to one of these UDFs with a fixed
arity and JSON arguments, so each UDF receives whole chunks (about 2,000 rows) of JSON text and answers them in
one batch: identical inputs within the chunk are embedded or completed once, and cached ones not at all.
Which UDFs exist, their arity, return types and the `AiFunctions` method answering each come from
`coco_sql.sqlkit.ai_catalogue`.

`side_effects=True` keeps DuckDB from folding calls with constant arguments into one (STACK-FACTS), and
`null_handling='special'` passes NULL arguments (omitted optional parameters) through to the function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from coco_sql.sqlkit.ai_catalogue import bound_udfs

if TYPE_CHECKING:
    from coco_sql.engines.duckdb.ai.functions import AiFunctions

UdfCall = Callable[[str, list[list[Any]]], list[Any]]


def arrow_type(spelling: str) -> pa.DataType:
    """The arrow type a catalogue `ReturnType.arrow` names: a pyarrow alias, or ``list<alias>``."""
    if spelling.startswith("list<") and spelling.endswith(">"):
        return pa.list_(arrow_type(spelling[len("list<") : -1]))
    return pa.type_for_alias(spelling)


def implementations(functions: AiFunctions) -> dict[str, Callable[..., list[Any]]]:
    """UDF name -> the `functions` method the catalogue names for it (one list per UDF parameter)."""
    return {udf.name: getattr(functions, udf.method) for udf, _ in bound_udfs()}


def _vectorized(call: UdfCall, udf_name: str, returns: pa.DataType, arity: int) -> Callable[..., pa.Array]:
    """An arrow UDF of exactly `arity` parameters (DuckDB reads the arity off the Python signature); up to
    `catalogue.MAX_UDF_ARITY`."""

    def udf(*columns: pa.Array | pa.ChunkedArray) -> pa.Array:
        return pa.array(call(udf_name, [column.to_pylist() for column in columns]), type=returns)

    fixed: dict[int, Callable[..., pa.Array]] = {
        1: lambda a: udf(a),
        2: lambda a, b: udf(a, b),
        3: lambda a, b, c: udf(a, b, c),
        4: lambda a, b, c, d: udf(a, b, c, d),
        5: lambda a, b, c, d, e: udf(a, b, c, d, e),
    }
    return fixed[arity]


def register_udfs(
    con: duckdb.DuckDBPyConnection, call: UdfCall, name: Callable[[str], str] | None = None
) -> None:
    """Create every bound AI UDF in `con` (before its configuration is locked); each chunk goes to
    `call(udf_name, columns)`, which answers one value per row. Inside a sandbox worker `call` forwards the chunk
    to the parent process, which owns the AI runtime (`sandbox`). `name` renames a UDF in DuckDB (a
    `coco_sql.connect` connection's own names, `engines.duckdb.ai_functions`); `call` still gets the bound name."""
    json_in = con.sqltype(
        "JSON"
    )  # the connection's own types: duckdb.sqltype would open the default database
    for udf, arity in bound_udfs():
        returns = arrow_type(udf.returns.arrow)
        con.create_function(
            udf.name if name is None else name(udf.name),
            _vectorized(call, udf.name, returns, arity),
            [json_in] * arity,
            con.sqltype(udf.returns.duckdb),
            type="arrow",
            side_effects=True,
            null_handling="special",
        )


def register_ai_functions(con: duckdb.DuckDBPyConnection, functions: AiFunctions) -> None:
    """Create every bound AI UDF in `con`, answered in this process by `functions`."""
    table = implementations(functions)
    register_udfs(con, lambda udf, columns: table[udf](*columns))
