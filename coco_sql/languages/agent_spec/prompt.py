"""What the model reads: the spec rendered as the system prompt, the question as the user turn.

The rendering is the contract between a spec and its behaviour, here and in Snowflake, so the export writes the same
texts into the agent (`export.py`): the instructions in their three parts; the semantic model (tables, columns,
relationships) and its verified queries; the documents; and, for each free SQL tool, the tables it may read with
their columns and types (without which a model could not write a query; in Snowflake this text is the tool's
description). Sample questions are not shown: in Snowflake they are suggestions for the user, not the model.
"""

from __future__ import annotations

from collections.abc import Mapping

from coco_sql.languages.agent_spec.spec import AgentSpec, Tool
from coco_sql.plugin_loader import DEPLOY_DIALECT, SANDBOX_DIALECT

DIALECT_NAMES = {DEPLOY_DIALECT: "Snowflake SQL", SANDBOX_DIALECT: "DuckDB SQL"}


def system_prompt(spec: AgentSpec, schemas: Mapping[str, Mapping[str, str]], dialect: str) -> str:
    parts = [spec.instructions.system.strip()]
    if spec.instructions.orchestration.strip():
        parts.append("# How to work\n" + spec.instructions.orchestration.strip())
    if spec.instructions.response.strip():
        parts.append("# How to answer\n" + spec.instructions.response.strip())
    parts.append(semantic_model_text(spec))
    free = [tool for tool in spec.tools if tool.free]
    if free:
        parts.append("# Tables\n" + "\n\n".join(tool_tables_text(tool, schemas, dialect) for tool in free))
    parts.append(documents_text(spec))
    return "\n\n".join(part for part in parts if part)


def documents_text(spec: AgentSpec) -> str:
    parts = []
    for document in spec.documents:
        about = f" ({document.description})" if document.description else ""
        parts.append(f"# Document: {document.name}{about}\n{document.text.strip()}")
    return "\n\n".join(parts)


def user_prompt(question: str, guidelines: str) -> str:
    return question.strip() + (f"\n\nGuidelines: {guidelines.strip()}" if guidelines.strip() else "")


def tool_tables_text(tool: Tool, schemas: Mapping[str, Mapping[str, str]], dialect: str) -> str:
    """The tables a free SQL tool may read, one line each: ``fees(id BIGINT, card_scheme VARCHAR, ...)``."""
    lines = [f"{tool.name} runs one read-only {DIALECT_NAMES.get(dialect, dialect)} query over these tables:"]
    for name in tool.tables:
        columns = ", ".join(f"{column} {kind}" for column, kind in schemas.get(name, {}).items())
        lines.append(f"- {name}({columns})")
    return "\n".join(lines)


def semantic_model_text(spec: AgentSpec) -> str:
    model = spec.semantic_model
    lines: list[str] = []
    if model.tables or model.relationships:
        lines.append("# Data model" + (f": {model.name}" if model.name else ""))
        if model.description:
            lines.append(model.description.strip())
        for table in model.tables:
            lines.append(f"- {table.name}" + (f": {table.description.strip()}" if table.description else ""))
            lines += [
                f"  - {c.name}" + (f": {c.description.strip()}" if c.description else "")
                for c in table.columns
            ]
        for r in model.relationships:
            lines.append(f"- join {r.name}: {r.left_table}({', '.join(r.left_columns)}) references "
                         f"{r.right_table}({', '.join(r.right_columns)})")  # fmt: skip
    if model.verified_queries:
        lines.append("# Verified queries")
        for query in model.verified_queries:
            lines.append(f"## {query.name}\nQuestion: {query.question.strip()}\nSQL:\n{query.sql.strip()}")
    return "\n".join(lines)
