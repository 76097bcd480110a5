"""The Snowflake functions a Snowflake-dialect program may call: one table, one entry per function.

Why a table of its own: in Snowflake dialect a program is meant to run unchanged in Snowflake, so a function is
allowed only if Snowflake has it, under the name written (``LIST_COSINE_SIMILARITY`` is DuckDB's, Snowflake's is
``VECTOR_COSINE_SIMILARITY``), with an argument count Snowflake accepts. The DuckDB allow-list
(:mod:`~coco_sql.sqlkit.allowlist`) still guards the transpiled tree that runs locally; this table guards what
the author wrote. AI functions are not here: :mod:`coco_sql.sqlkit.ai_catalogue` holds them.

Each entry also says how the call runs in DuckDB when sqlglot's Snowflake -> DuckDB transpilation gets it wrong
(``to_duckdb``, applied on the Snowflake tree before DuckDB SQL is generated, to the sqlglot ``node`` the call
parses to). Snowflake's VARIANT is JSON in DuckDB and its ARRAY is either a DuckDB list (ARRAY_CONSTRUCT, SPLIT)
or JSON (a VARIANT path, PARSE_JSON, an AI function's result), so the array rewrites go through ``to_json``,
which takes both. ``tests/test_snowflake_functions.py`` runs every entry through the validator and real DuckDB
and checks the value Snowflake documents.

``replaces`` lists the local (DuckDB or other dialect) spellings an entry is the Snowflake alternative for: a
program in Snowflake dialect that writes one of them is rejected with this entry's name in the message.

Not catalogued on purpose: ``DATEADD`` (DuckDB turns a DATE into a TIMESTAMP), ``JAROWINKLER_SIMILARITY`` and
``HASH`` (different algorithms or scales), ``SOUNDEX`` and ``VECTOR_L1_DISTANCE`` (no DuckDB function), and the non-deterministic ones
(``RANDOM``, ``CURRENT_DATE``...), which the allow-list refuses in both dialects. ``TO_BOOLEAN`` is left out
because sqlglot translates its error case to DuckDB's ``error()``, which the allow-list refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from coco_sql.llm.routing import CORTEX_EMBEDDING_MODELS

Arity = tuple[int, int | None]
Rewrite = Callable[[exp.Expression], exp.Expression]


@dataclass(frozen=True)
class SnowflakeFunction:
    """One Snowflake function: its name, how many arguments Snowflake accepts, and its DuckDB translation."""

    name: str  # upper case, as written in Snowflake SQL
    arity: Arity  # (fewest, most) arguments; most None = variadic
    to_duckdb: Rewrite | None = None  # None: sqlglot's transpilation is right
    node: type[exp.Expression] | None = None  # the sqlglot node `to_duckdb` rewrites
    replaces: tuple[str, ...] = ()  # local spellings this function is the Snowflake alternative for
    note: str = ""  # where the local translation knowingly differs from Snowflake


# -------------------------------------------------------------------------------------------- rewrites


def _call(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _as_json(node: exp.Expression) -> exp.Expression:
    """`to_json(x)`: a DuckDB list, struct, scalar or JSON value as JSON (JSON stays as it is)."""
    return _call("to_json", node)


def _array_size(node: exp.Expression) -> exp.Expression:
    """ARRAY_SIZE(a) -> json_array_length(to_json(a)): DuckDB's array_length refuses a JSON array."""
    return _call("json_array_length", _as_json(node.this))


def _json_elements(array: exp.Expression, function: str = "json_extract") -> exp.Expression:
    """The elements of a list or JSON array as a DuckDB list (of JSON, or of text with json_extract_string)."""
    return _call(function, _as_json(array), exp.Literal.string("$[*]"))


def _array_contains(node: exp.Expression) -> exp.Expression:
    """ARRAY_CONTAINS(value, array): the value compared as JSON with each element (Snowflake compares VARIANTs)."""
    return _call("list_contains", _json_elements(node.this), _as_json(node.expression))


def _array_to_string(node: exp.Expression) -> exp.Expression:
    """ARRAY_TO_STRING(array, sep): each element as text (strings unquoted), NULL elements as ''."""
    element = exp.to_identifier("e")
    as_text = exp.Lambda(
        this=exp.func("COALESCE", exp.column(element.copy()), exp.Literal.string("")), expressions=[element]
    )
    texts = _call("list_transform", _json_elements(node.this, "json_extract_string"), as_text)
    return _call("array_to_string", texts, node.expression)


def json_path(keys: list[exp.Expression]) -> exp.JSONPath | None:
    """`$.a[0]` for literal keys (strings are object keys, integers array indexes); None when one is not literal."""
    parts: list[exp.Expression] = [exp.JSONPathRoot()]
    for key in keys:
        if isinstance(key, exp.Literal) and key.is_string:
            parts.append(exp.JSONPathKey(this=key.this))
        elif isinstance(key, exp.Literal) and key.is_int:
            parts.append(exp.JSONPathSubscript(this=int(key.this)))
        else:
            return None
    return exp.JSONPath(expressions=parts)


def _get(node: exp.Expression) -> exp.Expression:
    """GET(v, key_or_index) -> a VARIANT extraction, so that `::string` gives the unquoted text."""
    path = json_path([node.expression])
    if path is None:
        return node
    return exp.JSONExtract(this=node.this, expression=path, variant_extract=True)


def _call_named(name: str) -> Rewrite:
    """Rename a two-argument typed node (sqlglot maps it to the wrong DuckDB function)."""
    return lambda node: _call(name, node.this, node.expression)


# ------------------------------------------------------------------------------------------------ table

_ANY: Arity = (0, None)

FUNCTIONS: tuple[SnowflakeFunction, ...] = (
    # conditional
    SnowflakeFunction("CASE", _ANY),  # CASE ... END: the parser enforces its shape
    SnowflakeFunction("IFF", (3, 3), replaces=("IF", "IIF")),
    SnowflakeFunction("IFNULL", (2, 2)),
    SnowflakeFunction("NVL", (2, 2)),
    SnowflakeFunction("NVL2", (3, 3)),
    SnowflakeFunction("NULLIF", (2, 2)),
    SnowflakeFunction("COALESCE", (1, None)),
    SnowflakeFunction("GREATEST", (1, None)),
    SnowflakeFunction("LEAST", (1, None)),
    SnowflakeFunction("DECODE", (3, None)),
    SnowflakeFunction("ZEROIFNULL", (1, 1)),
    SnowflakeFunction("NULLIFZERO", (1, 1)),
    SnowflakeFunction("EQUAL_NULL", (2, 2)),
    # conversion
    SnowflakeFunction("CAST", _ANY),
    SnowflakeFunction("TRY_CAST", _ANY),
    SnowflakeFunction("TO_VARCHAR", (1, 2)),
    SnowflakeFunction("TO_CHAR", (1, 2)),
    SnowflakeFunction("TO_NUMBER", (1, 4)),
    SnowflakeFunction("TO_DOUBLE", (1, 2)),
    SnowflakeFunction("TRY_TO_NUMBER", (1, 4)),
    # strings
    SnowflakeFunction("UPPER", (1, 1), replaces=("UCASE",)),
    SnowflakeFunction("LOWER", (1, 1), replaces=("LCASE",)),
    SnowflakeFunction("INITCAP", (1, 2)),
    SnowflakeFunction("LENGTH", (1, 1), replaces=("STRLEN", "CHAR_LENGTH", "CHARACTER_LENGTH")),
    SnowflakeFunction("LEN", (1, 1)),
    SnowflakeFunction("SUBSTR", (2, 3)),
    SnowflakeFunction("SUBSTRING", (2, 3)),
    SnowflakeFunction("LEFT", (2, 2)),
    SnowflakeFunction("RIGHT", (2, 2)),
    SnowflakeFunction("TRIM", (1, 2)),
    SnowflakeFunction("LTRIM", (1, 2)),
    SnowflakeFunction("RTRIM", (1, 2)),
    SnowflakeFunction("LPAD", (2, 3)),
    SnowflakeFunction("RPAD", (2, 3)),
    SnowflakeFunction("CONCAT", (1, None)),
    SnowflakeFunction("CONCAT_WS", (2, None)),
    SnowflakeFunction("REPLACE", (2, 3)),
    SnowflakeFunction("TRANSLATE", (3, 3)),
    SnowflakeFunction("REVERSE", (1, 1)),
    SnowflakeFunction("REPEAT", (2, 2)),
    SnowflakeFunction("SPLIT", (2, 2), replaces=("STRING_SPLIT", "STR_SPLIT", "STRING_TO_ARRAY")),
    SnowflakeFunction("SPLIT_PART", (3, 3)),
    SnowflakeFunction("STRTOK", (1, 3)),
    SnowflakeFunction("STRTOK_TO_ARRAY", (1, 2)),
    SnowflakeFunction("POSITION", (2, 3), replaces=("STRPOS", "INSTR")),
    SnowflakeFunction("CHARINDEX", (2, 3)),
    SnowflakeFunction("CONTAINS", (2, 2)),
    SnowflakeFunction("STARTSWITH", (2, 2), replaces=("STARTS_WITH", "PREFIX")),
    SnowflakeFunction("ENDSWITH", (2, 2), replaces=("ENDS_WITH", "SUFFIX")),
    SnowflakeFunction("ASCII", (1, 1)),
    SnowflakeFunction("CHR", (1, 1)),
    SnowflakeFunction("UNICODE", (1, 1)),
    SnowflakeFunction("EDITDISTANCE", (2, 3), replaces=("LEVENSHTEIN",)),
    SnowflakeFunction("MD5", (1, 1)),
    SnowflakeFunction("SHA1", (1, 1)),
    SnowflakeFunction("SHA2", (1, 2), replaces=("SHA256",)),
    # regular expressions (Snowflake's REGEXP_LIKE matches the whole string)
    SnowflakeFunction("REGEXP_LIKE", (2, 3), replaces=("REGEXP_MATCHES", "REGEXP_FULL_MATCH")),
    SnowflakeFunction("RLIKE", (2, 3)),
    SnowflakeFunction("REGEXP_SUBSTR", (2, 6), replaces=("REGEXP_EXTRACT",)),
    SnowflakeFunction("REGEXP_SUBSTR_ALL", (2, 6), replaces=("REGEXP_EXTRACT_ALL",)),
    SnowflakeFunction("REGEXP_REPLACE", (2, 6)),
    SnowflakeFunction("REGEXP_COUNT", (2, 4)),
    SnowflakeFunction("REGEXP_INSTR", (2, 7)),
    # numbers
    SnowflakeFunction("ABS", (1, 1)),
    SnowflakeFunction("SIGN", (1, 1)),
    SnowflakeFunction("CEIL", (1, 2)),
    SnowflakeFunction("FLOOR", (1, 2)),
    SnowflakeFunction("ROUND", (1, 3)),
    SnowflakeFunction("TRUNC", (1, 2)),
    SnowflakeFunction("SQRT", (1, 1)),
    SnowflakeFunction("CBRT", (1, 1)),
    SnowflakeFunction("SQUARE", (1, 1)),
    SnowflakeFunction("EXP", (1, 1)),
    SnowflakeFunction("LN", (1, 1)),
    SnowflakeFunction("LOG", (2, 2)),
    SnowflakeFunction("POWER", (2, 2)),
    SnowflakeFunction("POW", (2, 2)),
    SnowflakeFunction("MOD", (2, 2)),
    SnowflakeFunction("DIV0", (2, 2)),
    SnowflakeFunction("DIV0NULL", (2, 2)),
    # arrays and semi-structured data
    SnowflakeFunction("ARRAY_CONSTRUCT", (0, None), replaces=("LIST_VALUE",)),
    SnowflakeFunction(
        "ARRAY_SIZE",
        (1, 1),
        _array_size,
        exp.ArraySize,
        ("ARRAY_LENGTH", "LEN_ARRAY", "JSON_ARRAY_LENGTH", "CARDINALITY"),
        note="0 for a VARIANT that is no array (Snowflake: NULL)",
    ),
    SnowflakeFunction(
        "ARRAY_CONTAINS",
        (2, 2),
        _array_contains,
        exp.ArrayContains,
        ("LIST_CONTAINS", "LIST_HAS", "ARRAY_HAS"),
    ),
    SnowflakeFunction(
        "ARRAY_TO_STRING", (2, 2), _array_to_string, exp.ArrayToString, ("ARRAY_JOIN", "LIST_STRING_AGG")
    ),
    SnowflakeFunction("ARRAY_POSITION", (2, 2), replaces=("LIST_POSITION",)),
    SnowflakeFunction("ARRAY_DISTINCT", (1, 1), replaces=("LIST_DISTINCT",), note="order not kept"),
    SnowflakeFunction("ARRAY_SORT", (1, 3), replaces=("LIST_SORT",)),
    SnowflakeFunction("ARRAY_SLICE", (3, 3), replaces=("LIST_SLICE",)),
    SnowflakeFunction("ARRAY_CAT", (2, 2), replaces=("LIST_CONCAT", "ARRAY_CONCAT")),
    SnowflakeFunction("ARRAY_APPEND", (2, 2)),
    SnowflakeFunction("ARRAY_PREPEND", (2, 2)),
    SnowflakeFunction("ARRAY_INTERSECTION", (2, 2), replaces=("LIST_INTERSECT", "ARRAY_INTERSECT")),
    SnowflakeFunction("ARRAYS_OVERLAP", (2, 2), replaces=("LIST_HAS_ANY", "ARRAY_HAS_ANY")),
    SnowflakeFunction("ARRAY_COMPACT", (1, 1)),
    SnowflakeFunction("FILTER", (2, 2), replaces=("LIST_FILTER", "ARRAY_FILTER")),
    SnowflakeFunction("TRANSFORM", (2, 2), replaces=("LIST_TRANSFORM", "LIST_APPLY", "ARRAY_TRANSFORM")),
    SnowflakeFunction("GET", (2, 2), _get, exp.GetExtract, ("LIST_EXTRACT", "ARRAY_EXTRACT", "ELEMENT_AT")),
    SnowflakeFunction("GET_PATH", (2, 2), replaces=("JSON_EXTRACT", "JSON_EXTRACT_PATH")),
    SnowflakeFunction("JSON_EXTRACT_PATH_TEXT", (2, 2), replaces=("JSON_EXTRACT_STRING", "JSON_VALUE")),
    SnowflakeFunction("OBJECT_CONSTRUCT", (0, None), replaces=("STRUCT_PACK", "JSON_OBJECT")),
    SnowflakeFunction("OBJECT_KEYS", (1, 1), replaces=("JSON_KEYS", "MAP_KEYS")),
    SnowflakeFunction("PARSE_JSON", (1, 2), replaces=("JSON",)),
    SnowflakeFunction("TRY_PARSE_JSON", (1, 2)),
    SnowflakeFunction("TO_JSON", (1, 1)),
    SnowflakeFunction("TO_ARRAY", (1, 1)),
    # vectors (AI_EMBED returns a VECTOR)
    SnowflakeFunction(
        "VECTOR_COSINE_SIMILARITY",
        (2, 2),
        _call_named("list_cosine_similarity"),
        exp.CosineDistance,  # sqlglot 30 reads it as a distance, which is 1 - similarity
        ("LIST_COSINE_SIMILARITY", "ARRAY_COSINE_SIMILARITY", "COSINE_SIMILARITY"),
    ),
    SnowflakeFunction(
        "VECTOR_INNER_PRODUCT",
        (2, 2),
        _call_named("list_inner_product"),
        exp.DotProduct,
        ("LIST_INNER_PRODUCT", "LIST_DOT_PRODUCT", "ARRAY_INNER_PRODUCT", "DOT_PRODUCT"),
    ),
    SnowflakeFunction("VECTOR_L2_DISTANCE", (2, 2), replaces=("LIST_DISTANCE", "ARRAY_DISTANCE")),
    # dates
    SnowflakeFunction("DATEDIFF", (3, 3), replaces=("DATE_DIFF",)),
    SnowflakeFunction("DATE_TRUNC", (2, 2)),
    SnowflakeFunction("DATE_PART", (2, 2)),
    SnowflakeFunction("EXTRACT", _ANY),
    SnowflakeFunction("YEAR", (1, 1)),
    SnowflakeFunction("MONTH", (1, 1)),
    SnowflakeFunction("DAY", (1, 1)),
    SnowflakeFunction("TO_DATE", (1, 2)),
    SnowflakeFunction("LAST_DAY", (1, 2)),
    # aggregates
    SnowflakeFunction("COUNT", (0, None)),
    SnowflakeFunction("COUNT_IF", (1, 1), replaces=("COUNTIF",)),
    SnowflakeFunction("SUM", (1, 1)),
    SnowflakeFunction("AVG", (1, 1), replaces=("MEAN",)),
    SnowflakeFunction("MIN", (1, 1)),
    SnowflakeFunction("MAX", (1, 1)),
    SnowflakeFunction("MEDIAN", (1, 1)),
    SnowflakeFunction("MODE", (1, 1)),
    SnowflakeFunction("ANY_VALUE", (1, 1), replaces=("ARBITRARY", "FIRST")),
    SnowflakeFunction("MAX_BY", (2, 3), replaces=("ARG_MAX", "ARGMAX")),
    SnowflakeFunction("MIN_BY", (2, 3), replaces=("ARG_MIN", "ARGMIN")),
    SnowflakeFunction("LISTAGG", (1, 2), replaces=("STRING_AGG", "GROUP_CONCAT")),
    SnowflakeFunction("ARRAY_AGG", (1, 1), replaces=("LIST",)),
    SnowflakeFunction("ARRAY_UNIQUE_AGG", (1, 1)),
    SnowflakeFunction("BOOLAND_AGG", (1, 1), replaces=("BOOL_AND", "LOGICAL_AND")),
    SnowflakeFunction("BOOLOR_AGG", (1, 1), replaces=("BOOL_OR", "LOGICAL_OR")),
    SnowflakeFunction("STDDEV", (1, 1), replaces=("STDEV",)),
    SnowflakeFunction("VARIANCE", (1, 1)),
    SnowflakeFunction("CORR", (2, 2)),
    SnowflakeFunction("PERCENTILE_CONT", (1, 1), replaces=("QUANTILE_CONT", "QUANTILE")),
    # window functions
    SnowflakeFunction("ROW_NUMBER", (0, 0)),
    SnowflakeFunction("RANK", (0, 0)),
    SnowflakeFunction("DENSE_RANK", (0, 0)),
    SnowflakeFunction("PERCENT_RANK", (0, 0)),
    SnowflakeFunction("CUME_DIST", (0, 0)),
    SnowflakeFunction("NTILE", (1, 1)),
    SnowflakeFunction("LAG", (1, 3)),
    SnowflakeFunction("LEAD", (1, 3)),
    SnowflakeFunction("FIRST_VALUE", (1, 1)),
    SnowflakeFunction("LAST_VALUE", (1, 1)),
    SnowflakeFunction("NTH_VALUE", (2, 2)),
)
"""Every Snowflake function a Snowflake-dialect program may call, besides the task's AI functions."""


def _index(functions: tuple[SnowflakeFunction, ...]) -> Mapping[str, SnowflakeFunction]:
    names = [f.name for f in functions]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{', '.join(twice)} appears twice in the Snowflake function catalogue")
    return MappingProxyType({f.name: f for f in functions})


SNOWFLAKE_FUNCTIONS: Mapping[str, SnowflakeFunction] = _index(FUNCTIONS)
"""Upper-case Snowflake name -> entry."""

ALTERNATIVES: Mapping[str, str] = MappingProxyType(
    {local: f.name for f in FUNCTIONS for local in f.replaces if local not in SNOWFLAKE_FUNCTIONS}
)
"""A local spelling that is no Snowflake function -> the Snowflake function to write instead."""

REWRITES: Mapping[type[exp.Expression], Rewrite] = MappingProxyType(
    {f.node: f.to_duckdb for f in FUNCTIONS if f.node is not None and f.to_duckdb is not None}
)
"""sqlglot node -> its DuckDB translation, for the calls sqlglot transpiles wrongly."""

EMBED_MODELS: frozenset[str] = frozenset(CORTEX_EMBEDDING_MODELS) | {"voyage-multimodal-3"}
"""The models Snowflake documents for AI_EMBED (EMBED_TEXT_768 / EMBED_TEXT_1024 and AI_EMBED reference pages).
A Snowflake-dialect program names one of these; which local model stands in for it is the run's configuration
(`llm.routing.DEFAULT_ALIASES` maps the text models; the image model voyage-multimodal-3 has no stand-in)."""


def rejection(name: str) -> str:
    """Why `name` (not in the catalogue) is refused in Snowflake dialect, naming the alternative when there is one."""
    alternative = ALTERNATIVES.get(name)
    if alternative is not None:
        return f"function {name} does not exist in Snowflake; use {alternative}"
    return (
        f"function {name} is not a Snowflake function coco-sql supports "
        "(coco_sql/engines/snowflake/functions.py lists them)"
    )


# ------------------------------------------------------------------------------------------ written calls

_SYNTAX_NAMES: Mapping[type[exp.Expression], str] = MappingProxyType(
    {
        exp.Case: "CASE",
        exp.Cast: "CAST",
        exp.TryCast: "TRY_CAST",
        exp.Extract: "EXTRACT",
        exp.Array: "ARRAY_CONSTRUCT",  # [a, b]
        exp.Struct: "OBJECT_CONSTRUCT",  # {'k': v}
        exp.StrPosition: "POSITION",  # POSITION(a IN b)
        exp.GroupConcat: "LISTAGG",
        exp.DecodeCase: "DECODE",
    }
)
"""Calls sqlglot's special parsers read without recording where their name was: Snowflake syntax."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_OPEN = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE})
_CLOSE = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE})


class WrittenCalls:
    """The calls of one Snowflake source as written: each call's name and argument count.

    Why not the sqlglot node: sqlglot reads many spellings into one node (``ARRAY_LENGTH`` and ``ARRAY_SIZE`` are
    both ``ArraySize``) and rebuilds some calls (``ZEROIFNULL(a, b)`` becomes ``IFF(a IS NULL, 0, a)``, silently
    dropping ``b``). The parser records where a call's name starts and ends; the name and the arguments are read
    from the source's tokens there. Calls without that record are Snowflake syntax (``CAST(a AS INT)``, ``[1, 2]``)
    or take their Snowflake spelling from sqlglot's Snowflake generator.
    """

    def __init__(self, source: str) -> None:
        self._source = source
        self._tokens = Dialect.get_or_raise("snowflake").tokenize(source)
        self._at = {token.start: index for index, token in enumerate(self._tokens)}

    def local_names(self) -> list[str]:
        """Local spellings written as calls (a name token before `(`), found even where sqlglot's special parsers
        keep no position (``IF(...)`` is read as Snowflake's IFF)."""
        return [
            token.text.upper()
            for token, following in zip(self._tokens, self._tokens[1:], strict=False)
            if following.token_type == TokenType.L_PAREN
            and token.token_type not in (TokenType.STRING, TokenType.NATIONAL_STRING)
            and token.text.upper() in ALTERNATIVES
        ]

    def _span(self, node: exp.Expression) -> tuple[int, int] | None:
        start, end = node.meta.get("start"), node.meta.get("end")
        written = isinstance(start, int) and isinstance(end, int)
        if written and _IDENTIFIER.fullmatch(self._source[start : end + 1]):
            return start, end
        return None

    def name(self, node: exp.Func) -> str:
        """The upper-case name the call was written with."""
        if isinstance(node, exp.Anonymous):
            return node.name.upper()
        span = self._span(node)
        if span is not None:
            return self._source[span[0] : span[1] + 1].upper()
        syntax = _SYNTAX_NAMES.get(type(node))
        if syntax is not None:
            return syntax
        head = re.match(r"\s*([A-Za-z_][A-Za-z0-9_$]*)\s*\(", node.sql(dialect="snowflake"))
        return head.group(1).upper() if head else node.sql_name().upper()

    def arity(self, node: exp.Func) -> int:
        """How many arguments the call was written with (top-level commas between its parentheses)."""
        span = self._span(node)
        index = self._at.get(span[0]) if span is not None else None
        following = self._tokens[index + 1] if index is not None and index + 1 < len(self._tokens) else None
        if following is None or following.token_type != TokenType.L_PAREN:
            return _expression_count(node)  # syntax, or a call sqlglot rebuilt: count what it kept
        depth, commas, empty = 0, 0, True
        for token in self._tokens[index + 1 :]:
            if token.token_type in _OPEN:
                depth += 1
            elif token.token_type in _CLOSE:
                depth -= 1
                if depth == 0:
                    break
            elif token.token_type == TokenType.COMMA and depth == 1:
                commas += 1
            if depth >= 1 and not (depth == 1 and token.token_type == TokenType.L_PAREN):
                empty = False
        return 0 if empty else commas + 1


def _expression_count(node: exp.Func) -> int:
    if isinstance(node, exp.Anonymous):
        return len(node.expressions)
    count = 0
    for key in node.arg_types:
        value = node.args.get(key)
        if isinstance(value, exp.Expression):
            count += 1
        elif isinstance(value, list):
            count += sum(isinstance(v, exp.Expression) for v in value)
    return count
