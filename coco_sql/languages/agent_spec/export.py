"""Export of a spec to Snowflake: ``CREATE AGENT ... FROM SPECIFICATION $$...$$`` and the objects its tools need.

The script, in the order it must run:

1. one procedure per tool. Each is a Snowflake Scripting procedure (``LANGUAGE SQL``, ``RETURNS TABLE ()``): for a
   parameterised tool the body is ``RESULTSET DEFAULT (<the tool's query>)`` with its ``:name`` placeholders as
   the procedure's arguments, unchanged (Snowflake Scripting binds arguments with the same ``:name``), its tables
   qualified with the target schema (the one rewrite); for a free
   SQL tool the body runs the model's query with ``EXECUTE IMMEDIATE`` after refusing any text that is not one
   SELECT or WITH query, and the procedure runs with its owner's rights, owned by a role that may only read the
   tool's tables (``GRANT SELECT`` on those, ``GRANT OWNERSHIP`` of the procedure): the table list is enforced by
   Snowflake's privileges, as our sandbox enforces it by what its worker holds. Procedures rather than UDFs
   because a custom tool may be either (docs "Cortex Agents"), and only a procedure can return a table whose
   columns are not declared (``RETURNS TABLE ()``) and run a query built at call time (the free SQL tool);
2. ``CREATE SEMANTIC VIEW`` for the semantic model (its tables with PRIMARY KEY where a relationship references
   them, RELATIONSHIPS, one dimension per described column, comments), when it declares tables; a Cortex Analyst
   tool over it is added only on request (``analyst_tool``), since the evaluated runs had no such tool;
3. ``CREATE OR REPLACE AGENT``: the spec's Snowflake fields, with what our runtime shows the model written where
   Snowflake's model reads it: the semantic model's text, its verified queries and the documents appended to
   ``instructions.system`` (as `prompt.system_prompt` renders them); each free SQL tool's tables and columns
   appended to its description; each ``tool_resources`` entry rewritten to Snowflake's ``type``, ``identifier``
   and ``execution_environment``.

The agent document is checked against a table of the documented specification fields (`DOCUMENTED_KEYS`, from
the CREATE AGENT page and the Cortex Agents REST API page) and its size limit (100,000 bytes); every statement
sqlglot can parse is parsed (the procedures as CREATE, their queries as SELECT, the grants); CREATE AGENT and, in
sqlglot 30, CREATE SEMANTIC VIEW with qualified table names are not parseable there and are checked by
construction (validated names, escaped literals) and by the key table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from coco_sql.errors import ConfigError
from coco_sql.languages.agent_spec.prompt import documents_text, semantic_model_text, tool_tables_text
from coco_sql.languages.agent_spec.spec import MAX_SPEC_BYTES, AgentSpec, Tool, dump_yaml, tool_spec
from coco_sql.languages.agent_spec.toolsql import TableSchemas
from coco_sql.plugin_loader import DEPLOY_DIALECT

SQL_TYPES = {"string": "VARCHAR", "number": "FLOAT", "integer": "NUMBER", "boolean": "BOOLEAN"}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,254}$")
_ANY = "<name>"  # a key chosen by the user (a tool's name)

#: The documented keys of an agent specification, by place (a tuple of keys; `_ANY` for a tool's name, "[]" for
#: a list item). Sources: docs.snowflake.com/en/sql-reference/sql/create-agent (the YAML structure and its table
#: of keys: models, orchestration.budget, instructions, tools[].tool_spec, tool_resources keyed by tool name);
#: a Cortex Analyst tool's resources (semantic view, execution_environment {type: warehouse, warehouse}) as
#: Snowflake's examples write them. NOT re-read here: a custom tool's resources (type procedure|function,
#: identifier, execution_environment.query_timeout) are written as we remember the "Configure and interact with
#: agents" page; check them there before the first real deploy.
DOCUMENTED_KEYS: Mapping[tuple[str, ...], frozenset[str]] = {
    (): frozenset({"models", "orchestration", "instructions", "tools", "tool_resources"}),
    ("models",): frozenset({"orchestration"}),
    ("orchestration",): frozenset({"budget"}),
    ("orchestration", "budget"): frozenset({"seconds", "tokens"}),
    ("instructions",): frozenset({"response", "orchestration", "system", "sample_questions"}),
    ("instructions", "sample_questions", "[]"): frozenset({"question", "answer"}),
    ("tools", "[]"): frozenset({"tool_spec"}),
    ("tools", "[]", "tool_spec"): frozenset({"type", "name", "description", "input_schema"}),
    ("tool_resources", _ANY): frozenset({"type", "identifier", "execution_environment", "semantic_view"}),
    ("tool_resources", _ANY, "execution_environment"): frozenset({"type", "warehouse", "query_timeout"}),
}
OPEN_PLACES = frozenset({("tools", "[]", "tool_spec", "input_schema")})  # a JSON Schema: any of its keys


@dataclass(frozen=True)
class CortexExport:
    """The statements to run, in order (the last one is CREATE AGENT), and the agent's specification text."""

    statements: tuple[str, ...]
    specification: str

    @property
    def script(self) -> str:
        return "".join(f"{statement};\n\n" for statement in self.statements)


def export_cortex_agent(
    spec: AgentSpec, *, name: str, database: str, schema: str, warehouse: str, tables: TableSchemas,
    dialect: str = DEPLOY_DIALECT, comment: str = "", analyst_tool: bool = False, query_timeout: int = 60,
) -> CortexExport:  # fmt: skip
    """The SQL script that creates the agent of `spec` and its tools in `database`.`schema` (see the module
    docstring); ConfigError for a name that is not a plain identifier, or a spec that cannot be exported."""
    if dialect != DEPLOY_DIALECT:
        raise ConfigError(f"export to Snowflake needs a spec whose SQL is Snowflake SQL, not {dialect}")
    for label, value in (
        ("agent name", name),
        ("database", database),
        ("schema", schema),
        ("warehouse", warehouse),
    ):
        if not _IDENTIFIER.match(value):
            raise ConfigError(
                f"{label} {value!r} is not a plain Snowflake identifier (letters, digits, _ and $)"
            )
    where = f"{database}.{schema}"
    environment = {"type": "warehouse", "warehouse": warehouse, "query_timeout": query_timeout}
    statements: list[str] = []
    resources: dict[str, Any] = {}
    for tool in spec.tools:
        statements += _tool_statements(tool, name, where)
        resources[tool.name] = {"type": "procedure", "identifier": f"{where}.{tool.name}",
                                "execution_environment": dict(environment)}  # fmt: skip
    view = _semantic_view(spec, name, where)
    document = _agent_document(spec, tables, dialect, resources)
    if view is not None:
        statements.append(view)
        if analyst_tool:
            tool_name = f"{name}_analyst"
            document["tools"].append({"tool_spec": {"type": "cortex_analyst_text_to_sql", "name": tool_name,
                                                    "description": spec.semantic_model.description or tool_name}})  # fmt: skip
            document["tool_resources"][tool_name] = {"semantic_view": f"{where}.{_view_name(spec, name)}",
                                                     "execution_environment": dict(environment)}  # fmt: skip
    check_documented(document)
    text = dump_yaml(document)
    if "$$" in text:
        raise ConfigError(
            "the agent specification contains '$$', which would end the FROM SPECIFICATION block"
        )
    if len(text.encode("utf-8")) > MAX_SPEC_BYTES:
        raise ConfigError(
            f"the agent specification is {len(text.encode()):,} bytes, over Snowflake's {MAX_SPEC_BYTES:,}"
        )
    about = f"\n  COMMENT = {_string(comment)}" if comment else ""
    statements.append(f"CREATE OR REPLACE AGENT {where}.{name}{about}\n  FROM SPECIFICATION\n$$\n{text}$$")
    return CortexExport(tuple(statements), text)


def check_documented(document: Mapping[str, Any], place: tuple[str, ...] = (), shown: str = "") -> None:
    """ConfigError naming the first key (``tools[0].tool_spec.sql``) that Snowflake's specification does not
    document; `place` is where `document` sits in `DOCUMENTED_KEYS`."""
    if place in OPEN_PLACES:
        return
    allowed = DOCUMENTED_KEYS.get(place)
    for key, value in document.items():
        here = f"{shown}.{key}" if shown else str(key)
        if allowed is not None and key not in allowed:
            raise ConfigError(
                f"agent specification {here}: not a documented field ({', '.join(sorted(allowed))})"
            )
        child = ("tool_resources", _ANY) if place == ("tool_resources",) else (*place, key)
        if isinstance(value, Mapping):
            check_documented(value, child, here)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, Mapping):
                    check_documented(item, (*child, "[]"), f"{here}[{index}]")


def sqlglot_reading(statement: str) -> str:
    """How sqlglot (Snowflake dialect) reads one statement: its expression type (``Create``, ``Grant``; ``Command``
    where sqlglot has no grammar for it), or ``error: ...`` where it cannot parse it."""
    try:
        expressions = [e for e in sqlglot.parse(statement, read=DEPLOY_DIALECT) if e is not None]
    except SqlglotError as error:
        return f"error: {' '.join(str(error).split())[:200]}"
    return " ".join(type(e).__name__ for e in expressions)


def _tool_statements(tool: Tool, agent: str, where: str) -> list[str]:
    arguments = ", ".join(f"{p.name} {SQL_TYPES[p.type]}" for p in tool.parameters)
    head = (f"CREATE OR REPLACE PROCEDURE {where}.{tool.name}({arguments})\n  RETURNS TABLE ()\n  LANGUAGE SQL\n"
            f"  EXECUTE AS OWNER\n  COMMENT = {_string(tool.description[:1000])}\nAS\n")  # fmt: skip
    if not tool.free:
        body = qualified(tool.sql or "", where)
        if "$$" in body:
            raise ConfigError(
                f"tool {tool.name}: its query contains '$$', which would end the procedure body"
            )
        return [
            f"{head}$$\nDECLARE\n  res RESULTSET DEFAULT ({body});\nBEGIN\n  RETURN TABLE(res);\nEND;\n$$"
        ]
    refuse = "SELECT 'refused: one read-only SELECT or WITH query' AS error"
    body = ("$$\nDECLARE\n  res RESULTSET;\nBEGIN\n"
            "  IF (NOT REGEXP_LIKE(:sql, '\\\\s*(SELECT|WITH)\\\\s.*', 'is') OR CONTAINS(RTRIM(:sql, '; \\n'), ';')) THEN\n"
            f"    res := ({refuse});\n    RETURN TABLE(res);\n  END IF;\n"
            "  res := (EXECUTE IMMEDIATE :sql);\n  RETURN TABLE(res);\nEND;\n$$")  # fmt: skip
    role = f"{agent}_{tool.name}_reader".upper()
    grants = [f"CREATE ROLE IF NOT EXISTS {role}",
              f"GRANT USAGE ON DATABASE {where.split('.')[0]} TO ROLE {role}",
              f"GRANT USAGE ON SCHEMA {where} TO ROLE {role}",
              *(f"GRANT SELECT ON TABLE {where}.{table} TO ROLE {role}" for table in tool.tables)]  # fmt: skip
    own = f"GRANT OWNERSHIP ON PROCEDURE {where}.{tool.name}(VARCHAR) TO ROLE {role} COPY CURRENT GRANTS"
    return [*grants, head + body, own]


def qualified(sql: str, where: str) -> str:
    """`sql` with each table that is not one of its CTEs read from `where` (``fees`` -> ``DB.S.fees``): a
    procedure's query must not depend on the caller's current schema."""
    tree = sqlglot.parse_one(sql, read=DEPLOY_DIALECT)
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    database, schema = where.split(".")
    for table in tree.find_all(exp.Table):
        if not table.db and isinstance(table.this, exp.Identifier) and table.name.lower() not in ctes:
            table.set("db", exp.to_identifier(schema))
            table.set("catalog", exp.to_identifier(database))
    return tree.sql(dialect=DEPLOY_DIALECT)


def _view_name(spec: AgentSpec, agent: str) -> str:
    name = spec.semantic_model.name
    return name if name and _IDENTIFIER.match(name) else f"{agent}_model"


def _semantic_view(spec: AgentSpec, agent: str, where: str) -> str | None:
    model = spec.semantic_model
    if not model.tables:
        return None
    keys: dict[str, tuple[str, ...]] = {}
    for relation in model.relationships:
        keys.setdefault(relation.right_table, relation.right_columns)
    tables = []
    for table in model.tables:
        key = f" PRIMARY KEY ({', '.join(keys[table.name])})" if table.name in keys else ""
        about = f" COMMENT = {_string(table.description)}" if table.description else ""
        tables.append(f"    {table.name} AS {where}.{table.name}{key}{about}")
    parts = [
        f"CREATE OR REPLACE SEMANTIC VIEW {where}.{_view_name(spec, agent)}",
        "  TABLES (\n" + ",\n".join(tables) + "\n  )",
    ]
    if model.relationships:
        joins = [f"    {r.name} AS {r.left_table} ({', '.join(r.left_columns)}) REFERENCES {r.right_table} "
                 f"({', '.join(r.right_columns)})" for r in model.relationships]  # fmt: skip
        parts.append("  RELATIONSHIPS (\n" + ",\n".join(joins) + "\n  )")
    dimensions = [f"    {t.name}.{c.name} AS {c.name}" + (f" COMMENT = {_string(c.description)}" if c.description else "")
                  for t in model.tables for c in t.columns]  # fmt: skip
    if dimensions:
        parts.append("  DIMENSIONS (\n" + ",\n".join(dimensions) + "\n  )")
    if model.description:
        parts.append(f"  COMMENT = {_string(model.description)}")
    return "\n".join(parts)


def _agent_document(
    spec: AgentSpec, tables: TableSchemas, dialect: str, resources: dict[str, Any]
) -> dict[str, Any]:
    document: dict[str, Any] = {}
    if spec.model:
        document["models"] = {"orchestration": spec.model}
    budget = {
        k: v for k, v in (("seconds", spec.budget_seconds), ("tokens", spec.budget_tokens)) if v is not None
    }
    if budget:
        document["orchestration"] = {"budget": budget}
    i = spec.instructions
    system = "\n\n".join(p for p in (i.system.strip(), semantic_model_text(spec), documents_text(spec)) if p)
    instructions = {k: v for k, v in (("system", system), ("orchestration", i.orchestration.strip()),
                                      ("response", i.response.strip())) if v}  # fmt: skip
    if i.sample_questions:
        instructions["sample_questions"] = [{"question": s.question, **({"answer": s.answer} if s.answer else {})}
                                            for s in i.sample_questions]  # fmt: skip
    if instructions:
        document["instructions"] = instructions
    tools = []
    for tool in spec.tools:
        entry = tool_spec(tool)
        if tool.free:
            entry["description"] = "\n\n".join(
                p for p in (tool.description.strip(), tool_tables_text(tool, tables, dialect)) if p
            )
        tools.append({"tool_spec": entry})
    document["tools"] = tools
    document["tool_resources"] = resources
    return document


def _string(text: str) -> str:
    """A Snowflake string literal: backslashes and quotes escaped (Snowflake reads backslash escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
