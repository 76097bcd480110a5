"""Register the AI functions in a DuckDB connection as arrow-vectorized Python UDFs.

The validator's binder (`sqlcheck.ai_binding`) rewrites every AI call to one of these UDFs with a fixed
arity and JSON arguments, so each UDF receives whole chunks (about 2,000 rows) of JSON text and answers them in
one batch: identical inputs within the chunk are embedded or completed once, and cached ones not at all.

`side_effects=True` keeps DuckDB from folding calls with constant arguments into one (STACK-FACTS), and
`null_handling='special'` passes NULL arguments (omitted optional parameters) through to the function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from coco_sql.sqlcheck.ai_binding import COMPLETE_JSON, UDFS

if TYPE_CHECKING:
    from coco_sql.aifuncs.functions import AiFunctions

UdfCall = Callable[[str, list[list[Any]]], list[Any]]

_JSON_IN = duckdb.sqltype("JSON")
_RETURNS: dict[str, tuple[Any, pa.DataType]] = {
    "AI_COMPLETE": (duckdb.sqltype("VARCHAR"), pa.string()),
    "COCO_AI_COMPLETE_JSON": (duckdb.sqltype("VARCHAR"), pa.string()),
    "AI_CLASSIFY": (duckdb.sqltype("VARCHAR"), pa.string()),
    "AI_FILTER": (duckdb.sqltype("BOOLEAN"), pa.bool_()),
    "AI_EXTRACT": (duckdb.sqltype("VARCHAR"), pa.string()),
    "AI_SENTIMENT": (duckdb.sqltype("VARCHAR"), pa.string()),
    "AI_SIMILARITY": (duckdb.sqltype("DOUBLE"), pa.float64()),
    "AI_EMBED": (duckdb.sqltype("FLOAT[]"), pa.list_(pa.float32())),
    "AI_COUNT_TOKENS": (duckdb.sqltype("INTEGER"), pa.int32()),
    "COCO_AI_AGG": (duckdb.sqltype("VARCHAR"), pa.string()),
    "COCO_AI_SUMMARIZE_AGG": (duckdb.sqltype("VARCHAR"), pa.string()),
    "COCO_CORTEX_COMPLETE": (duckdb.sqltype("VARCHAR"), pa.string()),
    "COCO_CORTEX_CLASSIFY_TEXT": (duckdb.sqltype("VARCHAR"), pa.string()),
    "COCO_CORTEX_SENTIMENT": (duckdb.sqltype("DOUBLE"), pa.float64()),
}


def implementations(functions: AiFunctions) -> dict[str, Callable[..., list[Any]]]:
    f = functions
    return {
        "AI_COMPLETE": lambda m, p, o, r, d: f.complete(m, p, o, r, d, as_json=False),
        "COCO_AI_COMPLETE_JSON": lambda m, p, o, r, d: f.complete(m, p, o, r, d, as_json=True),
        "AI_CLASSIFY": f.classify,
        "AI_FILTER": f.filter,
        "AI_EXTRACT": f.extract,
        "AI_SENTIMENT": f.sentiment,
        "AI_SIMILARITY": f.similarity,
        "AI_EMBED": f.embed,
        "AI_COUNT_TOKENS": f.count_tokens,
        "COCO_AI_AGG": lambda values, instruction: f.aggregate(values, instruction, summarize=False),
        "COCO_AI_SUMMARIZE_AGG": lambda values: f.aggregate(values, [None] * len(values), summarize=True),
        "COCO_CORTEX_COMPLETE": lambda m, p, o: f.complete(
            m, p, o, [None] * len(m), [None] * len(m), as_json=False
        ),
        "COCO_CORTEX_CLASSIFY_TEXT": f.cortex_classify_text,
        "COCO_CORTEX_SENTIMENT": f.cortex_sentiment,
    }


def _vectorized(call: UdfCall, udf_name: str, arrow_type: pa.DataType, arity: int) -> Callable[..., pa.Array]:
    """An arrow UDF of exactly `arity` parameters (DuckDB reads the arity off the Python signature)."""

    def udf(*columns: pa.Array | pa.ChunkedArray) -> pa.Array:
        return pa.array(call(udf_name, [column.to_pylist() for column in columns]), type=arrow_type)

    fixed: dict[int, Callable[..., pa.Array]] = {
        1: lambda a: udf(a),
        2: lambda a, b: udf(a, b),
        3: lambda a, b, c: udf(a, b, c),
        4: lambda a, b, c, d: udf(a, b, c, d),
        5: lambda a, b, c, d, e: udf(a, b, c, d, e),
    }
    return fixed[arity]


def register_udfs(con: duckdb.DuckDBPyConnection, call: UdfCall) -> None:
    """Create every bound AI UDF in `con` (before its configuration is locked); each chunk goes to
    `call(udf_name, columns)`, which answers one value per row. Inside a sandbox worker `call` forwards the chunk
    to the parent process, which owns the AI runtime (`evaluate.sandbox`)."""
    bindings = {binding.udf: binding.arity for binding in UDFS.values()}
    bindings[COMPLETE_JSON.udf] = COMPLETE_JSON.arity
    for udf, arity in bindings.items():
        duck_type, arrow_type = _RETURNS[udf]
        con.create_function(
            udf,
            _vectorized(call, udf, arrow_type, arity),
            [_JSON_IN] * arity,
            duck_type,
            type="arrow",
            side_effects=True,
            null_handling="special",
        )


def register_ai_functions(con: duckdb.DuckDBPyConnection, functions: AiFunctions) -> None:
    """Create every bound AI UDF in `con`, answered in this process by `functions`."""
    table = implementations(functions)
    register_udfs(con, lambda udf, columns: table[udf](*columns))
