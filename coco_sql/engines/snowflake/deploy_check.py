"""Will this program run in Snowflake? Every function, argument name and type checked, every problem listed.

The validator stops at the first problem, which is what the search needs (one message to route around). A user
about to deploy needs the whole list, so this walks the program once and reports each problem as a
:class:`Finding`: a function Snowflake does not have (with its Snowflake alternative), an argument count Snowflake
refuses, an AI function argument name only coco-sql accepts (with the documented name), an AI_EMBED model Snowflake
does not serve, a type Snowflake does not have. When the walk finds nothing, the program also goes through the
Snowflake-dialect validator, so anything else it would refuse is a finding too.

A DuckDB-dialect program is checked as the Snowflake SQL sqlglot writes for it (what `coco-sql export --form
snowflake_view` deploys). Primitives (macros) are expanded first: Snowflake has no macros, so they deploy inline.
"""

from __future__ import annotations

from collections.abc import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from coco_sql.engines import Finding
from coco_sql.engines.snowflake import PLUGIN
from coco_sql.engines.snowflake.checks import unserved_embed_model
from coco_sql.engines.snowflake.functions import (
    ALTERNATIVES,
    SNOWFLAKE_FUNCTIONS,
    WrittenCalls,
)
from coco_sql.errors import CandidateRejected
from coco_sql.sqlkit.ai_catalogue import BY_NAME as AI_FUNCTIONS
from coco_sql.sqlkit.ai_catalogue import check_named_argument
from coco_sql.sqlkit.calls import iter_calls
from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.macros import expand_program
from coco_sql.sqlkit.nodes import positional_arguments
from coco_sql.sqlkit.validate import validate_candidate

T = exp.DataType.Type
SNOWFLAKE_TYPES: frozenset[exp.DataType.Type] = frozenset(
    {
        *(T.TEXT, T.VARCHAR, T.CHAR, T.NCHAR, T.NVARCHAR),
        *(T.TINYINT, T.SMALLINT, T.INT, T.BIGINT, T.DECIMAL, T.FLOAT, T.DOUBLE),
        T.BOOLEAN,
        *(T.DATE, T.TIME, T.DATETIME, T.TIMESTAMP, T.TIMESTAMPNTZ, T.TIMESTAMPLTZ, T.TIMESTAMPTZ),
        *(T.VARIANT, T.OBJECT, T.ARRAY, T.VECTOR),
        *(T.BINARY, T.VARBINARY, T.GEOGRAPHY, T.GEOMETRY),
    }
)
"""Snowflake's data types as sqlglot reads them (NUMBER is DECIMAL, STRING is TEXT)."""

_TYPE_ALTERNATIVES = {
    "JSON": "VARIANT",
    "STRUCT": "OBJECT",
    "LIST": "ARRAY",
    "MAP": "OBJECT",
    "UUID": "VARCHAR",
}


def check_program(
    code: str,
    dialect: str,
    *,
    where: str,
    input_columns: Mapping[str, str] | None = None,
    output_column: str | None = None,
    allowed_functions: frozenset[str] = frozenset(),
    references: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Finding]:
    """Every finding for `code` (written in `dialect`), labelled `where`. With the task's `input_columns` and
    `output_column` the Snowflake-dialect validator also runs (tables, columns, the output contract); the
    task's `references` (`tasks.references`) are tables the export ships with the program."""
    try:
        snowflake_sql = _as_snowflake(code, dialect)
        tree = sqlglot.parse_one(snowflake_sql, read="snowflake")
    except (SqlglotError, CandidateRejected) as error:
        return [Finding(where, f"does not parse as Snowflake SQL: {_first_line(error)}")]
    findings = _calls(tree, snowflake_sql, where) + _types(tree, where)
    if findings or output_column is None:
        return findings
    spec = ValidationSpec(
        input_columns=dict(input_columns or {}),
        output_column=output_column,
        allowed_functions=allowed_functions | frozenset(AI_FUNCTIONS),
        dialect="snowflake",
        references=references or {},
    )
    try:
        validate_candidate(snowflake_sql, spec)
    except CandidateRejected as error:
        return [Finding(where, str(error))]
    return []


def _as_snowflake(code: str, dialect: str) -> str:
    """The program's query as Snowflake SQL: macros inlined, and a DuckDB program transpiled by sqlglot."""
    expanded = expand_program(code, dialect) or code
    if dialect == "snowflake":
        return expanded
    return sqlglot.parse_one(expanded, read=dialect).sql(dialect="snowflake")


def _first_line(error: Exception) -> str:
    return " ".join(str(error).split("\n")[0].split())


def _calls(tree: exp.Expression, source: str, where: str) -> list[Finding]:
    written = WrittenCalls(source)
    findings = [
        Finding(
            f"{where}: {name}", f"function {name} does not exist in Snowflake", f"use {ALTERNATIVES[name]}"
        )
        for name in dict.fromkeys(written.local_names())
    ]
    reported = set(written.local_names())
    for node, dotted in iter_calls(tree):
        if dotted is not None:
            if dotted not in AI_FUNCTIONS:
                findings.append(Finding(f"{where}: {dotted}", f"{dotted} is not a Snowflake Cortex function"))
            else:
                findings += _ai_call(dotted, node.expression, node.expression.sql("snowflake"), where)
            continue
        if not isinstance(node, exp.Func) or (isinstance(node, exp.If) and isinstance(node.parent, exp.Case)):
            continue
        if isinstance(node, exp.Explode) or (isinstance(node.parent, exp.Table) and node.arg_key == "this"):
            continue  # FLATTEN and table functions: the validator rules on them
        name = written.name(node)
        if name in reported:
            continue
        if name in AI_FUNCTIONS:
            findings += _ai_call(name, node, name, where)
            continue
        function = SNOWFLAKE_FUNCTIONS.get(name)
        if function is None:
            reported.add(name)
            alternative = ALTERNATIVES.get(name)
            suggestion = (
                f"use {alternative}" if alternative else "not in coco-sql's Snowflake function catalogue"
            )
            findings.append(
                Finding(f"{where}: {name}", f"function {name} does not exist in Snowflake", suggestion)
            )
            continue
        count, (low, high) = written.arity(node), function.arity
        if count < low or (high is not None and count > high):
            expected = (
                f"{low}" if low == high else (f"at least {low}" if high is None else f"{low} to {high}")
            )
            findings.append(
                Finding(f"{where}: {name}", f"{name} takes {expected} argument(s) in Snowflake, got {count}")
            )
    return findings


def _ai_call(name: str, call: exp.Expression, label: str, where: str) -> list[Finding]:
    """Named arguments only coco-sql accepts, and AI_EMBED models Snowflake does not serve."""
    findings = []
    args = positional_arguments(call) if isinstance(call, exp.Func) else []
    for arg in args:
        if isinstance(arg, exp.Kwarg):
            refused = check_named_argument(name, arg.this.name, PLUGIN.ai)
            if refused is not None:
                findings.append(Finding(f"{where}: {label}", refused))
    model = unserved_embed_model(call) if name == "AI_EMBED" and isinstance(call, exp.Func) else None
    if model is not None:
        findings.append(
            Finding(
                f"{where}: AI_EMBED",
                f"embedding model {model!r} is not served by Snowflake",
                "use one of Snowflake's, e.g. 'snowflake-arctic-embed-l-v2.0'; a run maps it to a local model",
            )
        )
    return findings


def _types(tree: exp.Expression, where: str) -> list[Finding]:
    findings, seen = [], set()
    for node in tree.find_all(exp.DataType):
        if node.this in SNOWFLAKE_TYPES:
            continue
        written = node.this.name  # as read: Snowflake's generator would print JSON as VARIANT
        if written in seen:
            continue
        seen.add(written)
        alternative = _TYPE_ALTERNATIVES.get(node.this.name)
        findings.append(
            Finding(
                f"{where}: {written}",
                f"type {written} does not exist in Snowflake",
                f"use {alternative}" if alternative else "",
            )
        )
    return findings
