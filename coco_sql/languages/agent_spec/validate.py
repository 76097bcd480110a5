"""The agent spec's validator: its structure against a task, every name a tool or the semantic model refers to, and
every SQL text through the candidate validator's rules (`toolsql`).

A spec from the mutator is hostile text like any candidate. Parsing (`spec.parse`) already refused malformed and
oversized documents; this module refuses, with one line naming the place (``tool_resources.run_sql.tables[1]:
...``), what only the task can tell:

- a tool's query that writes, calls a function outside the allow-list, reads a table the task does not have (or,
  for a free SQL tool, a table outside its ``tables``), names a column no table has, or has placeholders that do
  not match its parameters;
- a free SQL tool whose input is not exactly one required text parameter ``sql``, or whose ``tables`` name a table
  the task does not have;
- semantic-model tables, columns and relationships the task's tables do not have, a verified query whose SQL fails
  the same checks, and names used twice;
- a spec whose canonical text is over Snowflake's size limit (an operator can grow a spec past it).

Being valid here is one layer, not the boundary: tools run in the SQL sandbox, and a call's SQL is checked again
with its arguments bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from coco_sql.errors import CandidateRejected
from coco_sql.languages.agent_spec.spec import (
    FREE_SQL_PARAMETER,
    MAX_SPEC_BYTES,
    AgentSpec,
    Tool,
    dump,
    reject,
)
from coco_sql.languages.agent_spec.toolsql import TableSchemas, check_query
from coco_sql.plugin_loader import DEPLOY_DIALECT


def validate_spec(spec: AgentSpec, tables: TableSchemas, *, dialect: str = DEPLOY_DIALECT) -> AgentSpec:
    """`spec` when it is valid for a task with `tables` (name -> column -> type); CandidateRejected otherwise."""
    if not spec.tools:
        raise reject(
            "tools", "the spec has no tool: it needs at least one SQL tool to read the task's tables"
        )
    _unique((tool.name for tool in spec.tools), "tools", "tool_spec.name")
    for i, tool in enumerate(spec.tools):
        _tool(tool, i, tables, dialect)
    _semantic_model(spec, tables, dialect)
    _unique((document.name for document in spec.documents), "documents", "name")
    size = len(dump(spec).encode("utf-8"))
    if size > MAX_SPEC_BYTES:
        raise reject("text", f"{size:,} bytes once written out, over the limit of {MAX_SPEC_BYTES:,}")
    return spec


def _tool(tool: Tool, index: int, tables: TableSchemas, dialect: str) -> None:
    resources = f"tool_resources.{tool.name}"
    if tool.free:
        names = [p.name for p in tool.parameters]
        if (
            names != [FREE_SQL_PARAMETER]
            or tool.parameters[0].type != "string"
            or not tool.parameters[0].required
        ):
            raise reject(f"tools[{index}].tool_spec.input_schema",
                         f"a free SQL tool takes exactly one required string parameter {FREE_SQL_PARAMETER!r}, "
                         f"got {', '.join(names) or 'none'}")  # fmt: skip
        _unique(tool.tables, f"{resources}.tables", None)
        for j, table in enumerate(tool.tables):
            if table not in tables:
                raise reject(
                    f"{resources}.tables[{j}]", f"{table!r} is not a table of this task ({_names(tables)})"
                )
        return
    optional = [p.name for p in tool.parameters if not p.required]
    if optional:
        raise reject(f"tools[{index}].tool_spec.input_schema.required",
                     f"parameter {optional[0]!r} must be required: the query needs a value for each :name")  # fmt: skip
    parameters = {p.name: p.type for p in tool.parameters}
    try:
        check_query(tool.sql or "", tables, tables.keys(), dialect=dialect, parameters=parameters)
    except CandidateRejected as error:
        raise reject(f"{resources}.sql", str(error)) from None


def _semantic_model(spec: AgentSpec, tables: TableSchemas, dialect: str) -> None:
    model = spec.semantic_model
    path = "semantic_model"
    _unique((t.name for t in model.tables), f"{path}.tables", "name")
    declared = {}
    for i, table in enumerate(model.tables):
        where = f"{path}.tables[{i}]"
        if table.name not in tables:
            raise reject(f"{where}.name", f"{table.name!r} is not a table of this task ({_names(tables)})")
        declared[table.name] = tables[table.name]
        _unique((c.name for c in table.columns), f"{where}.columns", "name")
        for j, column in enumerate(table.columns):
            if column.name not in tables[table.name]:
                raise reject(f"{where}.columns[{j}].name",
                             f"{table.name} has no column {column.name!r} ({_names(tables[table.name])})")  # fmt: skip
    _unique((r.name for r in model.relationships), f"{path}.relationships", "name")
    for i, relation in enumerate(model.relationships):
        where = f"{path}.relationships[{i}]"
        for side, table, columns in (("left", relation.left_table, relation.left_columns),
                                     ("right", relation.right_table, relation.right_columns)):  # fmt: skip
            if table not in declared:
                raise reject(f"{where}.{side}_table",
                             f"{table!r} is not one of semantic_model.tables ({_names(declared) or 'none'})")  # fmt: skip
            for j, column in enumerate(columns):
                if column not in declared[table]:
                    raise reject(f"{where}.{side}_columns[{j}]", f"{table} has no column {column!r}")
        if len(relation.left_columns) != len(relation.right_columns):
            raise reject(where, "left_columns and right_columns must pair up (same number of columns)")
    _unique((q.name for q in model.verified_queries), f"{path}.verified_queries", "name")
    for i, query in enumerate(model.verified_queries):
        try:
            check_query(query.sql, tables, tables.keys(), dialect=dialect)
        except CandidateRejected as error:
            raise reject(f"{path}.verified_queries[{i}].sql", str(error)) from None


def _unique(names: Iterable[str], path: str, field: str | None) -> None:
    names = list(names)
    twice = [name for name, count in Counter(names).items() if count > 1]
    if twice:
        index = [i for i, name in enumerate(names) if name == twice[0]][1]
        where = f"{path}[{index}]" + (f".{field}" if field else "")
        raise reject(where, f"{twice[0]!r} is used twice")


def _names(mapping: Mapping[str, object]) -> str:
    return ", ".join(sorted(mapping))
