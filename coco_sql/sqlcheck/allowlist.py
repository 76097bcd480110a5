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

from coco_sql.aifuncs import catalogue

Arity = tuple[int, int | None]


def _table(**groups: Mapping[str, Arity]) -> Mapping[str, Arity]:
    """Merge the themed groups below into one read-only mapping (themes exist only for the reader)."""
    merged: dict[str, Arity] = {}
    for group in groups.values():
        merged.update(group)
    return MappingProxyType(merged)


_ANY: Arity = (0, None)

_CONDITIONAL: dict[str, Arity] = {
    "CASE": _ANY,  # CASE ... END is a sqlglot Func node; its shape is enforced by the parser
    "IF": (3, 3),
    "IFF": (3, 3),
    "IIF": (3, 3),
    "COALESCE": (1, None),
    "IFNULL": (2, 2),
    "NVL": (2, 2),
    "NVL2": (3, 3),
    "NULLIF": (2, 2),
    "GREATEST": (1, None),
    "LEAST": (1, None),
    "DECODE": (3, None),
    "ZEROIFNULL": (1, 1),
    "NULLIFZERO": (1, 1),
    "EQUAL_NULL": (2, 2),
}

_CAST: dict[str, Arity] = {
    "CAST": _ANY,
    "TRY_CAST": _ANY,
    "TO_CHAR": (1, 2),
    "TO_VARCHAR": (1, 2),
    "TO_NUMBER": (1, 4),
    "TO_DOUBLE": (1, 2),
    "TO_BOOLEAN": (1, 1),
    "TYPEOF": (1, 1),
    "TRY_TO_NUMBER": (1, 4),
}

_STRING: dict[str, Arity] = {
    "UPPER": (1, 1),
    "LOWER": (1, 1),
    "UCASE": (1, 1),
    "LCASE": (1, 1),
    "INITCAP": (1, 2),
    "LENGTH": (1, 1),
    "LEN": (1, 1),
    "CHAR_LENGTH": (1, 1),
    "CHARACTER_LENGTH": (1, 1),
    "LENGTH_GRAPHEME": (1, 1),
    "OCTET_LENGTH": (1, 1),
    "BIT_LENGTH": (1, 1),
    "STRLEN": (1, 1),
    "SUBSTRING": (2, 3),
    "SUBSTR": (2, 3),
    "LEFT": (2, 2),
    "RIGHT": (2, 2),
    "TRIM": (1, 2),
    "LTRIM": (1, 2),
    "RTRIM": (1, 2),
    "PAD": _ANY,  # typed node for LPAD/RPAD
    "LPAD": (2, 3),
    "RPAD": (2, 3),
    "CONCAT": (1, None),
    "CONCAT_WS": (2, None),
    "DPIPE": _ANY,  # a || b
    "REPLACE": (2, 3),
    "TRANSLATE": (3, 3),
    "REVERSE": (1, 1),
    "REPEAT": (2, 2),
    "SPLIT": (2, 2),
    "STRING_SPLIT": (2, 2),
    "STR_SPLIT": (2, 2),
    "STRING_TO_ARRAY": (2, 2),
    "SPLIT_PART": (3, 3),
    "STR_POSITION": _ANY,  # typed node for STRPOS / INSTR / POSITION / CHARINDEX
    "STRPOS": (2, 2),
    "INSTR": (2, 2),
    "POSITION": (2, 3),
    "CHARINDEX": (2, 3),
    "CONTAINS": (2, 2),
    "STARTS_WITH": (2, 2),
    "STARTSWITH": (2, 2),
    "ENDS_WITH": (2, 2),
    "ENDSWITH": (2, 2),
    "PREFIX": (2, 2),
    "SUFFIX": (2, 2),
    "ASCII": (1, 1),
    "CHR": (1, 1),
    "CHAR": (1, 1),
    "UNICODE": (1, 1),
    "FORMAT": (1, None),
    "PRINTF": (1, None),
    "STRIP_ACCENTS": (1, 1),
    "NFC_NORMALIZE": (1, 1),
    "LEVENSHTEIN": (2, 2),
    "EDITDIST3": (2, 2),
    "DAMERAU_LEVENSHTEIN": (2, 2),
    "HAMMING": (2, 2),
    "JACCARD": (2, 2),
    "JARO_SIMILARITY": (2, 3),
    "JARO_WINKLER_SIMILARITY": (2, 3),
    "JAROWINKLER_SIMILARITY": _ANY,
    "MD5": (1, 1),
    "SHA1": (1, 1),
    "SHA256": (1, 1),
    "SHA2": (1, 2),
    "HASH": (1, None),
    "BASE64": (1, 1),
    "TO_BASE64": (1, 1),
    "FROM_BASE64": (1, 1),
    "ENCODE": (1, 2),
    "DECODE_BYTES": (1, 1),
    "CHAR_LENGTH_GRAPHEME": (1, 1),
    "SOUNDEX": (1, 1),
    "ARRAY_TO_STRING": (2, 3),
    "ARRAY_JOIN": (2, 3),
    "LIST_STRING_AGG": (1, 2),
}

_REGEX: dict[str, Arity] = {
    "REGEXP_LIKE": (2, 3),
    "REGEXP_MATCHES": (2, 3),
    "REGEXP_FULL_MATCH": (2, 3),
    "RLIKE": (2, 3),
    "REGEXP_EXTRACT": (2, 4),
    "REGEXP_EXTRACT_ALL": (2, 4),
    "REGEXP_SUBSTR": (2, 6),
    "REGEXP_SUBSTR_ALL": (2, 6),
    "REGEXP_REPLACE": (2, 6),
    "REGEXP_COUNT": (2, 4),
    "REGEXP_INSTR": (2, 7),
    "REGEXP_SPLIT_TO_ARRAY": (2, 3),
    "REGEXP_ESCAPE": (1, 1),
}

_MATH: dict[str, Arity] = {
    "ABS": (1, 1),
    "SIGN": (1, 1),
    "SIGNUM": (1, 1),
    "CEIL": (1, 2),
    "CEILING": (1, 2),
    "FLOOR": (1, 2),
    "ROUND": (1, 2),
    "TRUNC": (1, 2),
    "TRUNCATE": (1, 2),
    "SQRT": (1, 1),
    "CBRT": (1, 1),
    "EXP": (1, 1),
    "LN": (1, 1),
    "LOG": (1, 2),
    "LOG2": (1, 1),
    "LOG10": (1, 1),
    "POWER": (2, 2),
    "POW": (2, 2),
    "MOD": (2, 2),
    "DIV": (2, 2),
    "PI": (0, 0),
    "SIN": (1, 1),
    "COS": (1, 1),
    "TAN": (1, 1),
    "ATAN": (1, 1),
    "ATAN2": (2, 2),
    "DEGREES": (1, 1),
    "RADIANS": (1, 1),
    "IS_NAN": (1, 1),
    "ISNAN": (1, 1),
    "ISINF": (1, 1),
    "ISFINITE": (1, 1),
    "BIT_COUNT": (1, 1),
    "SAFE_DIVIDE": (2, 2),
    "DIV0": (2, 2),
    "DIV0NULL": (2, 2),
}

_DATE: dict[str, Arity] = {
    "DATE_DIFF": (2, 3),
    "DATEDIFF": (2, 3),
    "DATE_SUB": (2, 3),
    "DATE_ADD": (2, 3),
    "DATEADD": (2, 3),
    "TIMESTAMPADD": (2, 3),
    "TIMESTAMPDIFF": (2, 3),
    "TIMESTAMP_ADD": (2, 3),
    "TIMESTAMP_DIFF": (2, 3),
    "TS_OR_DS_ADD": _ANY,
    "TS_OR_DS_DIFF": _ANY,
    "TS_OR_DS_TO_DATE": _ANY,
    "DATE_TRUNC": (2, 2),
    "DATETRUNC": (2, 2),
    "TIMESTAMP_TRUNC": _ANY,
    "DATE_PART": (2, 2),
    "DATEPART": (2, 2),
    "EXTRACT": (2, 2),
    "STRFTIME": (2, 2),
    "STRPTIME": (2, 2),
    "TRY_STRPTIME": (2, 2),
    "TIME_TO_STR": _ANY,
    "STR_TO_TIME": _ANY,
    "STR_TO_DATE": _ANY,
    "TIME_STR_TO_TIME": _ANY,
    "TIME_STR_TO_DATE": _ANY,
    "TIME_TO_UNIX": _ANY,
    "UNIX_TO_TIME": _ANY,
    "EPOCH": (1, 1),
    "EPOCH_MS": (1, 1),
    "TO_TIMESTAMP": (1, 2),
    "TO_DATE": (1, 2),
    "TO_TIME": (1, 2),
    "TRY_TO_DATE": (1, 2),
    "TRY_TO_TIMESTAMP": (1, 2),
    "MAKE_DATE": (1, 3),
    "MAKE_TIMESTAMP": (1, 6),
    "DATE_FROM_PARTS": _ANY,
    "DATEFROMPARTS": _ANY,
    "LAST_DAY": (1, 2),
    "YEAR": (1, 1),
    "QUARTER": (1, 1),
    "MONTH": (1, 1),
    "WEEK": (1, 1),
    "WEEKOFYEAR": (1, 1),
    "DAY": (1, 1),
    "DAYOFMONTH": (1, 1),
    "DAY_OF_MONTH": (1, 1),
    "DAYOFWEEK": (1, 1),
    "DAY_OF_WEEK": (1, 1),
    "DAYOFYEAR": (1, 1),
    "DAY_OF_YEAR": (1, 1),
    "HOUR": (1, 1),
    "MINUTE": (1, 1),
    "SECOND": (1, 1),
    "DAYNAME": (1, 1),
    "MONTHNAME": (1, 1),
    "TO_DAYS": (1, 1),
    "INTERVAL": _ANY,
}

_COLLECTIONS: dict[str, Arity] = {
    # lists / arrays
    "ARRAY": _ANY,  # [a, b], list_value(...), ARRAY_CONSTRUCT(...)
    "LIST_VALUE": (0, None),
    "ARRAY_CONSTRUCT": (0, None),
    "ARRAY_SIZE": _ANY,
    "ARRAY_LENGTH": (1, 2),
    "LEN_ARRAY": (1, 1),
    "ARRAY_CONTAINS": (2, 2),
    "ARRAY_HAS": (2, 2),
    "LIST_CONTAINS": (2, 2),
    "LIST_HAS": (2, 2),
    "ARRAY_POSITION": (2, 2),
    "LIST_POSITION": (2, 2),
    "ARRAY_DISTINCT": (1, 1),
    "LIST_DISTINCT": (1, 1),
    "ARRAY_SORT": (1, 3),
    "LIST_SORT": (1, 3),
    "ARRAY_REVERSE_SORT": (1, 2),
    "LIST_REVERSE_SORT": (1, 2),
    "ARRAY_SLICE": (3, 4),
    "LIST_SLICE": (3, 4),
    "ARRAY_CONCAT": (1, None),
    "LIST_CONCAT": (1, None),
    "ARRAY_CAT": (2, 2),
    "ARRAY_APPEND": (2, 2),
    "ARRAY_PREPEND": (2, 2),
    "ARRAY_INTERSECT": (2, 2),
    "LIST_INTERSECT": (2, 2),
    "ARRAY_HAS_ANY": (2, 2),
    "ARRAY_HAS_ALL": (2, 2),
    "ARRAYS_OVERLAP": (2, 2),
    "LIST_HAS_ANY": (2, 2),
    "LIST_HAS_ALL": (2, 2),
    "ARRAY_FILTER": (2, 2),
    "FILTER": (2, 2),
    "LIST_FILTER": (2, 2),
    "TRANSFORM": (2, 2),
    "ARRAY_TRANSFORM": (2, 2),
    "LIST_TRANSFORM": (2, 2),
    "LIST_APPLY": (2, 2),
    "ARRAY_APPLY": (2, 2),
    "LIST_REDUCE": (2, 3),
    "ARRAY_REDUCE": (2, 3),
    "LIST_AGGREGATE": (2, None),
    "ARRAY_AGGREGATE": (2, None),
    "LIST_EXTRACT": (2, 2),
    "ARRAY_EXTRACT": (2, 2),
    "LIST_ELEMENT": (2, 2),
    "GET": (2, 2),
    "FLATTEN": (
        1,
        1,
    ),  # DuckDB list flatten (scalar); Snowflake FLATTEN is the table function, see snowflake.py
    "UNNEST": (1, None),
    "EXPLODE": _ANY,  # typed node for UNNEST in the select list
    "ARRAY_TO_STRING_AGG": (1, 2),
    "LIST_COSINE_SIMILARITY": (2, 2),
    "ARRAY_COSINE_SIMILARITY": (2, 2),
    "LIST_INNER_PRODUCT": (2, 2),
    "ARRAY_INNER_PRODUCT": (2, 2),
    "LIST_DISTANCE": (2, 2),
    "ARRAY_DISTANCE": (2, 2),
    "GENERATE_SERIES_LIST": _ANY,
    # structs / maps
    "STRUCT": _ANY,
    "STRUCT_PACK": (1, None),
    "ROW": (1, None),
    "STRUCT_EXTRACT": (2, 2),
    "OBJECT_CONSTRUCT": (0, None),
    "MAP": (0, 2),
    "MAP_EXTRACT": (2, 2),
    "MAP_KEYS": (1, 1),
    "MAP_VALUES": (1, 1),
    "MAP_FROM_ENTRIES": (1, 1),
    "ELEMENT_AT": (2, 2),
    "CARDINALITY": (1, 1),
    "VAR_MAP": _ANY,
    "TO_MAP": _ANY,
    # JSON
    "JSON_EXTRACT": (2, 2),
    "JSON_EXTRACT_PATH": (2, None),
    "JSON_EXTRACT_SCALAR": (2, 2),
    "JSON_EXTRACT_STRING": (2, 2),
    "JSON_EXTRACT_PATH_TEXT": (2, None),
    "JSON_VALUE": (2, 2),
    "JSON_ARRAY_LENGTH": (1, 2),
    "JSON_KEYS": (1, 2),
    "JSON_TYPE": (1, 2),
    "JSON_VALID": (1, 1),
    "JSON_CONTAINS": (2, 2),
    "JSON_EXISTS": (2, 2),
    "JSON_ARRAY": (0, None),
    "JSON_OBJECT": (0, None),
    "JSON_MERGE_PATCH": (2, None),
    "JSON_QUOTE": (1, 1),
    "JSON": (1, 1),
    "PARSE_JSON": (1, 2),
    "TRY_PARSE_JSON": (1, 2),
    "JSON_PARSE": (1, 1),
    "TO_JSON": (1, 1),
    "JSON_FORMAT": _ANY,
    "JSONB_EXTRACT": _ANY,
    "JSONB_EXTRACT_SCALAR": _ANY,
    "GET_PATH": (2, 2),
    "OBJECT_KEYS": (1, 1),
    "TO_VARIANT": (1, 1),
    "TO_ARRAY": (1, 1),
    "TO_OBJECT": (1, 1),
    "IS_NULL_VALUE": (1, 1),
}

_AGGREGATE: dict[str, Arity] = {
    "COUNT": (0, None),
    "COUNT_IF": (1, 1),
    "COUNTIF": (1, 1),
    "SUM": (1, 1),
    "AVG": (1, 1),
    "MEAN": (1, 1),
    "MIN": (1, 2),
    "MAX": (1, 2),
    "MEDIAN": (1, 1),
    "MODE": (1, 1),
    "ANY_VALUE": (1, 1),
    "FIRST": (1, 1),
    "LAST": (1, 1),
    "ARBITRARY": (1, 1),
    "ARG_MAX": (2, 3),
    "ARG_MIN": (2, 3),
    "ARGMAX": (2, 3),
    "ARGMIN": (2, 3),
    "MAX_BY": (2, 3),
    "MIN_BY": (2, 3),
    "STRING_AGG": (1, 2),
    "GROUP_CONCAT": (1, 2),
    "LISTAGG": (1, 2),
    "LIST": (1, 1),
    "ARRAY_AGG": (1, 1),
    "ARRAY_UNIQUE_AGG": (1, 1),
    "BOOL_AND": (1, 1),
    "BOOL_OR": (1, 1),
    "BOOLAND_AGG": (1, 1),
    "BOOLOR_AGG": (1, 1),
    "LOGICAL_AND": (1, 1),
    "LOGICAL_OR": (1, 1),
    "STDDEV": (1, 1),
    "STDEV": (1, 1),
    "STDDEV_POP": (1, 1),
    "STDDEV_SAMP": (1, 1),
    "VARIANCE": (1, 1),
    "VAR_POP": (1, 1),
    "VAR_SAMP": (1, 1),
    "CORR": (2, 2),
    "COVAR_POP": (2, 2),
    "COVAR_SAMP": (2, 2),
    "APPROX_COUNT_DISTINCT": (1, 1),
    "APPROX_DISTINCT": (1, 2),
    "QUANTILE": (2, 2),
    "QUANTILE_CONT": (2, 2),
    "QUANTILE_DISC": (2, 2),
    "PERCENTILE_CONT": (1, 2),
    "PERCENTILE_DISC": (1, 2),
    "HISTOGRAM": (1, 2),
    "ENTROPY": (1, 1),
    "PRODUCT": (1, 1),
    "FSUM": (1, 1),
    "WITHIN_GROUP": _ANY,
}

_WINDOW: dict[str, Arity] = {
    "ROW_NUMBER": (0, 0),
    "RANK": (0, 0),
    "DENSE_RANK": (0, 0),
    "PERCENT_RANK": (0, 0),
    "CUME_DIST": (0, 0),
    "NTILE": (1, 1),
    "LAG": (1, 3),
    "LEAD": (1, 3),
    "FIRST_VALUE": (1, 1),
    "LAST_VALUE": (1, 1),
    "NTH_VALUE": (2, 2),
}

BASE_FUNCTIONS: Mapping[str, Arity] = _table(
    conditional=_CONDITIONAL,
    cast=_CAST,
    string=_STRING,
    regex=_REGEX,
    math=_MATH,
    date=_DATE,
    collections=_COLLECTIONS,
    aggregate=_AGGREGATE,
    window=_WINDOW,
)
"""Deterministic scalar, aggregate and window functions every candidate may use."""

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
"""AI functions, derived from :data:`coco_sql.aifuncs.catalogue.CATALOGUE` (including the Cortex spellings).

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
