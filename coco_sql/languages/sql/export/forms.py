"""A SQL champion in the form it will run in: a DuckDB view or table macro, a Snowflake view or table function,
or a dbt model.

A program reads the relation `input`; an exported form reads the user's `source` table instead (the table a
registered task came from, or one the caller names). The rewrite is done on the sqlglot tree, so CTEs named like
a table and quoted names stay what they are, and each form is generated in its own dialect and parsed back by
sqlglot in that dialect before it is returned.

    duckdb_view         CREATE OR REPLACE VIEW <name> AS <program over source>                    (DuckDB)
    duckdb_macro        CREATE OR REPLACE MACRO <name>() AS TABLE <program over source>           (DuckDB)
    snowflake_view      CREATE OR REPLACE VIEW <name> AS <program over source>                    (Snowflake)
    snowflake_function  CREATE OR REPLACE FUNCTION <name>() RETURNS TABLE (<columns>)
                        AS $$ <program over source> $$                                   (Snowflake SQL UDTF)
    dbt                 {{ config(materialized='view') }} <program over {{ ref('source') }} or the source's name>

A program that reads the training rows as `examples` ships them (`export.references`): a DuckDB table of
literals, a staged JSON-lines file loaded by COPY INTO for Snowflake, a seed and a typing model for dbt; the
files come back in `Exported.files`.

`source` is a table name (`source_table`: a name, schema.name or db.schema.name); anything else is refused.

The user's table as it is (issue 38): a program reads `input`, whose id column is `id` and whose inputs have the
task's names; the user's table may call them otherwise (`coco_task(..., {'id_column': 'ticket_id'})`, a pack's
`data.id_column`). `columns` maps each of `input`'s columns to the source's (`id` -> `ticket_id`); when one
differs, the form reads the source through a projection that names them as the program does (`(SELECT
ticket_id AS id, body FROM tickets) AS input`), and returns the id under the source's name again (`id AS
ticket_id`), so the export runs on the table as it is and its rows join back to it.

The UDTF must declare its columns, and a program alone does not say every type: a column passed through from
the source (`id`) has whatever type the user's table gives it. So each output column (the query's named
selects, in order) is typed from, first, `columns` when the caller knows them (e.g. the task's contract:
`{'label': 'INTEGER'}`), then sqlglot's type inference over the program with the source's and the reference
tables' columns typed (`source_types`: the registered task's column types, or a pack's `id` and input columns),
and otherwise VARIANT. The function's body casts each column to the type it declares, so what it returns is
what it says. A program whose columns are not all named (`SELECT *`) cannot be a UDTF and is refused.

AI functions keep their Cortex spelling: the Snowflake and dbt forms run on Cortex; the DuckDB forms need them
installed as functions where they run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError, TokenError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from coco_sql.errors import ConfigError
from coco_sql.languages.sql.export.references import reads_table, ship_table
from coco_sql.plugin_loader import DEPLOY_DIALECT, SANDBOX_DIALECT
from coco_sql.plugins import engine
from coco_sql.sqlkit.macros import expand_program
from coco_sql.sqlkit.relations import over_source

FORMS = ("sql", "duckdb_view", "duckdb_macro", "snowflake_view", "snowflake_function", "dbt")
# forms written elsewhere: a Snowflake AI function, and it beside Snowflake's optimizer (`export.ai_function`)
OTHER_FORMS = ("snowflake_ai_function", "snowflake_experiment")
_DBT_PLACEHOLDER = "coco_dbt_source"
_TARGETS = {
    "duckdb_view": SANDBOX_DIALECT,
    "duckdb_macro": SANDBOX_DIALECT,
    "snowflake_view": DEPLOY_DIALECT,
    "snowflake_function": DEPLOY_DIALECT,
    "dbt": DEPLOY_DIALECT,
}
T = exp.DataType.Type
# sqlglot's inferred (or a contract's) type -> the UDTF column type; anything else is VARIANT.
_UDTF_TYPES: dict[exp.DataType.Type, str] = {
    **dict.fromkeys((T.TINYINT, T.SMALLINT, T.INT, T.BIGINT, T.INT128, T.UBIGINT, T.UINT), "NUMBER"),
    **dict.fromkeys((T.FLOAT, T.DOUBLE), "FLOAT"),
    **dict.fromkeys((T.VARCHAR, T.TEXT, T.CHAR, T.NVARCHAR, T.NCHAR), "VARCHAR"),
    T.BOOLEAN: "BOOLEAN",
    T.DATE: "DATE",
    **dict.fromkeys((T.TIMESTAMP, T.TIMESTAMPNTZ), "TIMESTAMP_NTZ"),
    **dict.fromkeys((T.ARRAY, T.LIST), "ARRAY"),
}


@dataclass(frozen=True)
class Exported:
    """A program in an export form: its `code`, and the `files` (path -> text) that ship with it (the rows of the
    reference tables it reads, for Snowflake and dbt: `export.references`)."""

    code: str
    files: dict[str, str] = field(default_factory=dict)


def export_form(code: str, dialect: str, form: str, **options: Any) -> str:
    """`export_bundle(...).code`: the form's own text, without the files that ship with it."""
    return export_bundle(code, dialect, form, **options).code


def export_bundle(
    code: str,
    dialect: str,
    form: str,
    *,
    name: str,
    source: str = "input",
    columns: Mapping[str, str] | None = None,
    references: Mapping[str, tuple[pd.DataFrame, Mapping[str, str]]] | None = None,
    source_types: Mapping[str, str] | None = None,
    note: str | None = None,
    source_columns: Mapping[str, str] | None = None,
) -> Exported:
    """The program `code` (written in `dialect`) as `form`, reading `source` instead of `input`. `columns` gives
    known output column types (DuckDB or contract spelling, e.g. the task's contract) for `snowflake_function`,
    and `source_types` the source's column types (DuckDB spelling), from which the function's other columns are
    typed. `references`: the task's reference tables (name -> rows and column types); each one the program
    reads ships with it as `<name>_<table>` (`export.references`) and is read under that name. `note`: lines
    put at the top of a form that runs in Snowflake (as SQL comments). `source_columns`: each of `input`'s
    columns -> the source's name for it (the module docstring; None or the same names: read as they are)."""
    if form not in FORMS:
        raise ConfigError(f"unknown export form {form!r} (known: {', '.join(FORMS + OTHER_FORMS)})")
    if form == "sql" and dialect == SANDBOX_DIALECT:
        return Exported(
            code
        )  # ships its primitives: DuckDB runs the CREATE MACRO statements before the query
    code = expand_program(code, dialect) or code  # elsewhere they are inlined: Snowflake has no macros
    if form == "sql":
        return Exported(code)
    target = _TARGETS[form]
    reads = source_table(source, target)
    program = sqlglot.parse_one(code, read=dialect)
    own = engine(dialect).checks
    if (
        own is not None and target == SANDBOX_DIALECT
    ):  # sqlglot alone gets FLATTEN, `:` paths and VECTOR_* wrong
        program = own.load().to_duckdb(program, frozenset())
    relation: str | exp.Table = _DBT_PLACEHOLDER if form == "dbt" else reads
    tables, files, refs = "", {}, {_DBT_PLACEHOLDER: reads}
    renamed = {k: v for k, v in (source_columns or {}).items() if k != v}
    schema = {"input": _input_types(source_types or {}, source_columns or {})}
    for table, (rows, types) in (references or {}).items():
        if not reads_table(code, dialect, table):
            continue
        shipped = ship_table(f"{name}_{table}", rows, types, "dbt" if form == "dbt" else target)
        read_as = f"{_DBT_PLACEHOLDER}_{table}" if form == "dbt" else shipped.reads
        refs[read_as] = exp.to_table(shipped.reads)
        program = over_source(program, read_as, table)
        schema[read_as] = dict(types)
        tables += shipped.sql + ("\n" if shipped.sql else "")
        files |= shipped.files
    if renamed:
        program = _id_renamed(program, (source_columns or {}).get("id", "id"))
        relation = _projection(relation, source_columns or {})
    body = over_source(program, relation).sql(dialect=target, pretty=True)
    header = (
        "".join(f"-- {line}\n" for line in note.splitlines()) if note and target == DEPLOY_DIALECT else ""
    )
    if form == "dbt":
        return Exported(_dbt(body, refs, header), files)
    identifier = exp.to_identifier(name).sql(dialect=target)
    if form == "snowflake_function":
        return Exported(header + tables + _udtf(identifier, program, dialect, body, columns, schema), files)
    if form == "duckdb_macro":
        return Exported(
            tables + _checked(f"CREATE OR REPLACE MACRO {identifier}() AS TABLE\n{body}", target, body)
        )
    return Exported(
        header + tables + _checked(f"CREATE OR REPLACE VIEW {identifier} AS\n{body}", target, body), files
    )


def _udtf(
    identifier: str,
    program: exp.Expression,
    dialect: str,
    body: str,
    columns: Mapping[str, str] | None,
    schema: Mapping[str, Mapping[str, str]],
) -> str:
    """The Snowflake SQL table function over `body` (the program over its source), its columns typed, and each
    column cast to its declared type, so the function returns what it declares."""
    if "$$" in body:
        raise ConfigError("form 'snowflake_function' quotes the program with $$, which the program contains")
    declared = _udtf_columns(program, dialect, columns, schema)
    returns = ", ".join(f"{column} {kind}" for column, kind in declared)
    casts = ",\n  ".join(f"CAST({column} AS {kind}) AS {column}" for column, kind in declared)
    typed = f"SELECT\n  {casts}\nFROM (\n{body}\n) AS coco_udtf"
    return _checked(
        f"CREATE OR REPLACE FUNCTION {identifier}()\nRETURNS TABLE ({returns})\nAS $$\n{typed}\n$$",
        DEPLOY_DIALECT,
        typed,
    )


def _checked(statement: str, dialect: str, body: str) -> str:
    """`statement` (and its query `body`, which a function holds as a string) parsed back in `dialect`."""
    sqlglot.parse_one(statement, read=dialect)
    sqlglot.parse_one(body, read=dialect)
    return statement + ";\n"


def source_table(source: str, dialect: str) -> exp.Table:
    """`source` as a table of `dialect`: a name, `schema.name` or `db.schema.name` (quoted parts allowed), its
    comments dropped; a one-line ConfigError for anything else (a query, a function, several statements), so an
    export never pastes the caller's text into its SQL or its Jinja."""
    try:
        table = sqlglot.parse_one(source, into=exp.Table, read=dialect) if isinstance(source, str) else None
    except (ParseError, TokenError):
        table = None
    if table is None or len(table.parts) > 3 or not all(isinstance(p, exp.Identifier) for p in table.parts):
        raise ConfigError(
            f"the source to export over must be a table name such as signals or raw.signals (got {source!r})"
        )
    for node in table.walk():
        node.comments = None
    return table


def _dbt(body: str, refs: Mapping[str, exp.Table], header: str = "") -> str:
    """The model: each placeholder of `refs` replaced by `{{ ref('name') }}` for a plain name, else the table's SQL
    name, inside `{% raw %}` when it holds a Jinja delimiter (a quoted name may), so Jinja never evaluates it.
    Placeholders are replaced longest first (the examples' placeholder extends the source's)."""
    sqlglot.parse_one(body, read=DEPLOY_DIALECT)  # the model minus its Jinja parses as Snowflake SQL
    for placeholder in sorted(refs, key=len, reverse=True):
        body = body.replace(placeholder, _dbt_reference(refs[placeholder]))
    return "{{ config(materialized='view') }}\n\n" + header + body + "\n"


def _dbt_reference(table: exp.Table) -> str:
    name = table.sql(dialect=DEPLOY_DIALECT)
    if len(table.parts) == 1 and re.fullmatch(r"\w+", name):
        return "{{ ref('" + name + "') }}"
    if any(mark in name for mark in ("{{", "}}", "{%", "%}", "{#", "#}")):
        if "endraw" in name:
            raise ConfigError(f"the source {name} cannot be quoted for dbt's Jinja: rename the table")
        return "{% raw %}" + name + "{% endraw %}"
    return name


def _udtf_columns(
    program: exp.Expression,
    dialect: str,
    known: Mapping[str, str] | None,
    schema: Mapping[str, Mapping[str, str]],
) -> list[tuple[str, str]]:
    """(column, type) for the program's output columns, typed as the module docstring says."""
    if not isinstance(program, exp.Query) or not program.selects:
        raise ConfigError("form 'snowflake_function' needs a query")
    names = program.named_selects
    if "*" in names or len(names) != len(program.selects):
        raise ConfigError(
            "form 'snowflake_function' needs every output column named (no * and no unnamed expressions): "
            "a table function declares its columns"
        )
    typed = _typed_program(program, dialect, schema)
    known_types = {
        key.lower(): exp.DataType.build(value, dialect=SANDBOX_DIALECT)
        for key, value in (known or {}).items()
    }
    declared = []
    for column_name, select in zip(names, typed.selects, strict=True):
        kind = known_types.get(column_name.lower(), select.type)
        declared.append((exp.to_identifier(column_name).sql(dialect=DEPLOY_DIALECT), _udtf_type(kind)))
    return declared


def _typed_program(
    program: exp.Expression, dialect: str, schema: Mapping[str, Mapping[str, str]]
) -> exp.Expression:
    """`program` with sqlglot's types, its columns resolved against `schema` (table -> column -> DuckDB type)
    when it qualifies against it (a column passed through from the source gets the source's type)."""
    tables = {
        table: {
            column: exp.DataType.build(kind, dialect=SANDBOX_DIALECT).sql(dialect)
            for column, kind in cols.items()
        }
        for table, cols in schema.items()
        if cols
    }
    if tables:
        try:
            qualified = qualify(
                program.copy(), schema=tables, dialect=dialect, validate_qualify_columns=False
            )
            return annotate_types(qualified, schema=tables, dialect=dialect)
        except (OptimizeError, ParseError, KeyError, ValueError):
            pass  # a program sqlglot cannot qualify is typed on its own below
    return annotate_types(program.copy(), dialect=dialect)


def _udtf_type(kind: exp.DataType | None) -> str:
    return "VARIANT" if kind is None else _UDTF_TYPES.get(kind.this, "VARIANT")


def _input_types(source_types: Mapping[str, str], columns: Mapping[str, str]) -> dict[str, str]:
    """The types of `input`'s columns from the source's (`columns`: input's name -> the source's)."""
    typed = dict(source_types)
    for name, column in columns.items():
        if column in source_types:
            typed[name] = source_types[column]
    return typed


def _projection(source: str | exp.Table, columns: Mapping[str, str]) -> exp.Subquery:
    """`(SELECT ticket_id AS id, body FROM source)`: the source's columns under the names the program reads."""
    table = source.copy() if isinstance(source, exp.Table) else exp.to_table(source)
    selects = [
        exp.column(exp.to_identifier(column))
        if column == name
        else exp.alias_(exp.column(exp.to_identifier(column)), exp.to_identifier(name))
        for name, column in columns.items()
    ]
    return exp.select(*selects).from_(table).subquery()


def _id_renamed(program: exp.Expression, id_column: str) -> exp.Expression:
    """`program` returning its `id` under the source's name `id_column`: the outermost SELECT's `id` projection
    aliased, or (a set operation, a `*`) the program wrapped in a SELECT that renames it."""
    if id_column == "id":
        return program
    target = exp.to_identifier(id_column)
    if isinstance(program, exp.Select):
        for index, projection in enumerate(program.expressions):
            if projection.alias_or_name.lower() == "id" and not isinstance(projection, exp.Star):
                renamed = program.copy()
                inner = projection.this if isinstance(projection, exp.Alias) else projection
                renamed.expressions[index].replace(exp.alias_(inner.copy(), target))
                return renamed
    names = program.named_selects if isinstance(program, exp.Query) else []
    if not names or "*" in names:
        raise ConfigError(
            f"the program's columns are not all named, so its id cannot be returned as {id_column!r}: "
            "name them (SELECT id, ... AS <output>)"
        )
    selects = [
        exp.alias_(exp.column("id", table="coco_champion"), target)
        if name.lower() == "id"
        else exp.column(exp.to_identifier(name), table="coco_champion")
        for name in names
    ]
    return exp.select(*selects).from_(
        exp.Subquery(this=program.copy(), alias=exp.TableAlias(this=exp.to_identifier("coco_champion")))
    )


PROXY_PARAMS = "proxy_params"  # the CTE of a learned proxy's constants (`languages.sql.mutate.proxy_edits`)


def proxy_note(code: str, dialect: str, fitted_on: Mapping[str, str]) -> str | None:
    """What a form running in Snowflake must say about a learned proxy in `code`: its constants (the
    `proxy_params` CTE and the confidence threshold) were fitted on the vectors of the model that answered
    AI_EMBED during the search (`fitted_on`: the model the SQL names -> the one that answered it, the run's
    recorded aliases), and Cortex's model, whose cosines have another scale, answers it here. None when the
    program has no proxy or the same model answered."""
    tree = sqlglot.parse_one(code, read=dialect)
    if not any(cte.alias == PROXY_PARAMS for cte in tree.find_all(exp.CTE)):
        return None
    named = sorted(
        {
            e.expressions[0].name
            for e in tree.find_all(exp.AIEmbed)
            if e.expressions and e.expressions[0].is_string
        }
    )
    swapped = [(model, fitted_on[model]) for model in named if fitted_on.get(model, model) != model]
    if not swapped:
        return None
    pairs = ", ".join(f"{answered} (AI_EMBED('{model}') here)" for model, answered in swapped)
    return (
        f"coco-sql: the proxy's constants ({PROXY_PARAMS}: k, tau, tau_label, example_weight, ratio, word_weight,\n"
        f"alpha, and the confidence threshold it is compared with) were fitted on the embeddings of {pairs}\n"
        "during the search. In Snowflake, Cortex's model answers AI_EMBED, and its cosines have another scale:\n"
        "the constants are not refitted for it. Check the proxy's answers on labelled rows before relying on them."
    )
