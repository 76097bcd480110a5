"""The functions a candidate may call, with their arities, kept as plain tables.

Why an allow-list and not a deny-list: candidates are untrusted and DuckDB keeps growing functions that touch
files, the network, settings or the catalog. A name we have not reviewed is rejected, so a new DuckDB release
cannot silently widen what a candidate can do. The cost of a missing harmless function is one clear rejection
message, which the mutator reads and routes around.

Keys are upper-case names as sqlglot reports them: for a typed sqlglot node its class name and its
``sql_names()`` (e.g. ``STR_POSITION`` for ``strpos``/``instr``), for an unknown call the name as written.
Each value is ``(min_args, max_args)``; ``max_args`` of ``None`` means variadic.

Arity is checked for every ``exp.Anonymous`` call (sqlglot accepts any argument count there) and, for typed
nodes, only for the names in :data:`TYPED_ARITY_CHECKED`: sqlglot normalises some typed nodes (``range(3)``
gains a start, ``list_sort`` gains a flag), so their argument count is not the written count in general.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from coco_sql.sqlkit import ai_catalogue as catalogue
from coco_sql.sqlkit.base_functions import BASE_FUNCTIONS as BASE_FUNCTIONS
from coco_sql.sqlkit.base_functions import Arity

TRANSPILED_FUNCTIONS: frozenset[str] = frozenset(
    {"LIST_COUNT", "LIST_SUM", "LIST_ZIP", "EUCLIDEAN_DISTANCE", "GENERATE_SERIES", "REGEXP_SPLIT"}
)
"""DuckDB functions sqlglot writes for Snowflake ones (ARRAY_DISTINCT, REGEXP_INSTR, ARRAY_INTERSECTION,
VECTOR_L2_DISTANCE...): allowed in the transpiled tree of a Snowflake-dialect program only, so the DuckDB
dialect's allow-list stays as it was."""

TYPED_ARITY_CHECKED: frozenset[str] = frozenset(
    {
        "IF",
        "NULLIF",
        "UPPER",
        "LOWER",
        "LENGTH",
        "SUBSTRING",
        "LEFT",
        "RIGHT",
        "REPLACE",
        "SPLIT_PART",
        "CONTAINS",
        "STARTS_WITH",
        "ENDS_WITH",
        "REGEXP_LIKE",
        "REGEXP_EXTRACT",
        "LEVENSHTEIN",
        "ABS",
        "ROUND",
        "SUM",
        "AVG",
        "COALESCE",
        "GREATEST",
        "LEAST",
        "NTILE",
        "LAG",
        "LEAD",
    }
)
"""Typed sqlglot nodes whose argument count equals the written count, so their arity is checked too."""

# Why notable functions are excluded: shown in the rejection so the mutator learns the rule, not just a name.
NON_DETERMINISTIC: frozenset[str] = frozenset(
    {
        "RAND",
        "RANDOM",
        "UUID",
        "GEN_RANDOM_UUID",
        "UUIDV4",
        "UUIDV7",
        "UUID_STRING",
        "NOW",
        "CURRENT_TIMESTAMP",
        "CURRENT_DATE",
        "CURRENT_TIME",
        "CURRENT_LOCALTIMESTAMP",
        "GET_CURRENT_TIMESTAMP",
        "TRANSACTION_TIMESTAMP",
        "LOCALTIMESTAMP",
        "LOCALTIME",
        "TODAY",
        "SETSEED",
        "NEXTVAL",
        "CURRVAL",
        "SYSDATE",
        "GETDATE",
        "UNIFORM",
        "NORMAL",
        "SEQ4",
        "SEQ8",
    }
)

EXTERNAL_ACCESS: frozenset[str] = frozenset(
    {
        "READ_CSV",
        "READ_CSV_AUTO",
        "READ_TEXT",
        "READ_BLOB",
        "READ_JSON",
        "READ_JSON_AUTO",
        "READ_NDJSON",
        "READ_PARQUET",
        "PARQUET_SCAN",
        "GLOB",
        "GETENV",
        "GETVARIABLE",
        "CURRENT_SETTING",
        "CURRENT_SCHEMA",
        "CURRENT_DATABASE",
        "CURRENT_CATALOG",
        "CURRENT_USER",
        "CURRENT_ROLE",
        "CURRENT_VERSION",
        "VERSION",
        "QUERY",
        "QUERY_TABLE",
        "SQL_AUTO_COMPLETE",
        "HTTPFS",
        "ERROR",
    }
)


class AISignature(NamedTuple):
    """Parameters of an AI function in Snowflake's order, and how many of them are required.

    One table serves two purposes: the arity check and the rewrite of named arguments (``model => 'x'``) into
    positional ones, which our DuckDB Python UDFs need because they do not bind by name.
    """

    params: tuple[str, ...]
    required: int
    variadic: bool = False

    @property
    def arity(self) -> Arity:
        return (self.required, None if self.variadic else len(self.params))


AI_SIGNATURES: Mapping[str, AISignature] = MappingProxyType(
    {
        name: AISignature(function.param_names, function.required, function.variadic)
        for name, function in catalogue.BY_NAME.items()
    }
)
"""AI functions, derived from :data:`coco_sql.sqlkit.ai_catalogue.CATALOGUE` (including the Cortex spellings).

None is allowed by default: a task enables them via ``ValidationSpec.allowed_functions``."""


def rejection_reason(names: list[str]) -> str:
    """A short clause explaining why a call (known under ``names``) is off the allow-list, for the message."""
    if any(name in NON_DETERMINISTIC for name in names):
        return "it is non-deterministic, so scores would not be reproducible"
    if any(n in EXTERNAL_ACCESS or n.startswith(("READ_", "DUCKDB_", "PRAGMA_", "PG_")) for n in names):
        return "it reads files, settings, the environment or the catalog"
    if any(name in AI_SIGNATURES for name in names):
        return "this task does not enable this AI function"
    return "it is not on the allow-list of deterministic scalar, aggregate and window functions"
