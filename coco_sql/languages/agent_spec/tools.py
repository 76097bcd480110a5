"""A spec's tools, offered to the model and run over the task's tables: in the SQL sandbox, or in the warehouse.

Each tool becomes a `ToolSpec` for the chat (its name, its description, its input_schema). A call is answered by
`ToolBox.call`: the arguments are checked and bound (`toolsql.bind_query`), or, for a free SQL tool, the query the
model wrote is checked against the tool's tables; the checked query then runs where the toolbox's `ToolQueries`
run it, with the tool's deadline. Locally (`SandboxQueries`) that is the DuckDB text in a `Sandbox` that holds only
the tables the tool may read (so a free SQL tool's table list is enforced by what the worker process has, not only
by the validator); when the store runs candidates itself (Snowflake), `warehouse.WarehouseToolQueries`: the query
as written, over the task's tables staged in the warehouse. What comes back is bounded: at most `max_rows` rows,
each cell at most `max_cell_chars` characters, the whole result at most `max_result_chars` characters of JSON,
which is exactly what the model reads and what the trace keeps.

A refused or failed call is not an error of the run: the model reads the one-line reason and may try again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from coco_sql.errors import CandidateRejected, EvaluationError
from coco_sql.languages.agent_spec.spec import FREE_SQL_PARAMETER, AgentSpec, Tool
from coco_sql.languages.agent_spec.toolsql import CheckedQuery, TableSchemas, bind_query, check_query
from coco_sql.llm.providers.base import ToolCall, ToolSpec
from coco_sql.plugin_loader import DEPLOY_DIALECT
from coco_sql.sandbox.database import Sandbox, SandboxLimits


@dataclass(frozen=True)
class ToolLimits:
    query_seconds: float = 10.0
    max_rows: int = 50
    max_cell_chars: int = 4_000
    max_result_chars: int = 8_000
    memory_mb: int = 1024


@dataclass(frozen=True)
class ToolOutcome:
    """One call's result, as the model reads it (`text`) and as the trace keeps it (`step`)."""

    tool: str
    arguments: Any
    sql: str | None = None  # as checked: the model's query, or the tool's query with its arguments bound
    tables: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    row_count: int = 0
    truncated: bool = False
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        if self.error is not None:
            return json.dumps({"error": self.error}, ensure_ascii=False)
        document = {
            "columns": list(self.columns),
            "rows": [list(r) for r in self.rows],
            "row_count": self.row_count,
        }
        if self.truncated:
            document["truncated"] = True
        return json.dumps(document, ensure_ascii=False, separators=(",", ":"))

    def step(self) -> dict[str, Any]:
        step: dict[str, Any] = {"tool": self.tool, "arguments": self.arguments}
        if self.sql is not None:
            step["sql"] = self.sql
            step["tables"] = list(self.tables)
        if self.error is not None:
            step["error"] = self.error
        else:
            step.update(columns=list(self.columns), rows=[list(r) for r in self.rows], row_count=self.row_count,
                        truncated=self.truncated)  # fmt: skip
        return step


class ToolQueries(Protocol):
    """Where a checked tool query runs."""

    def run(
        self, checked: CheckedQuery, readable: tuple[str, ...], deadline_s: float
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        """(columns, rows) of `checked`, which may read the tables `readable` only; EvaluationError (one line)
        when it fails or passes its deadline."""
        ...

    def close(self) -> None: ...


class SandboxQueries:
    """The DuckDB text of each query in a SQL sandbox holding only the tables the tool may read: sandboxes start
    on first use, one per set of readable tables; `close()` stops them."""

    def __init__(self, tables: Mapping[str, pd.DataFrame], memory_mb: int) -> None:
        self._rows = tables
        self._memory_mb = memory_mb
        self._sandboxes: dict[frozenset[str], Sandbox] = {}

    def run(
        self, checked: CheckedQuery, readable: tuple[str, ...], deadline_s: float
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        result = self._sandbox(readable).run(checked.runnable, deadline_s)
        return result.columns, result.rows

    def _sandbox(self, readable: tuple[str, ...]) -> Sandbox:
        key = frozenset(readable)
        if key not in self._sandboxes:
            names = sorted(key)
            self._sandboxes[key] = Sandbox(
                self._rows[names[0]], relation=names[0], limits=SandboxLimits(memory_mb=self._memory_mb),
                tables={name: self._rows[name] for name in names[1:]},
            )  # fmt: skip
        return self._sandboxes[key]

    def close(self) -> None:
        for sandbox in self._sandboxes.values():
            sandbox.close()
        self._sandboxes.clear()


class ToolBox:
    """The spec's tools over one task's tables, run by `queries` (default: SQL sandboxes over `tables`, started
    on first use and stopped by `close()`; queries given by the caller stay the caller's to close). Not
    thread-safe (one question at a time)."""

    def __init__(
        self, spec: AgentSpec, tables: Mapping[str, pd.DataFrame], schemas: TableSchemas,
        *, dialect: str = DEPLOY_DIALECT, limits: ToolLimits | None = None, queries: ToolQueries | None = None,
    ) -> None:  # fmt: skip
        self.spec = spec
        self.limits = limits or ToolLimits()
        self.dialect = dialect
        self._schemas = schemas
        self._tools = {tool.name: tool for tool in spec.tools}
        self._owned = queries is None
        self._queries = queries if queries is not None else SandboxQueries(tables, self.limits.memory_mb)

    @property
    def schemas(self) -> TableSchemas:
        return self._schemas

    @property
    def chat_tools(self) -> tuple[ToolSpec, ...]:
        return tuple(_chat_tool(tool) for tool in self.spec.tools)

    def call(self, call: ToolCall, seconds_left: float | None = None) -> ToolOutcome:
        """Run one call; every failure comes back as the outcome's one-line `error`."""
        arguments = call.arguments if call.arguments is not None else call.raw_arguments
        tool = self._tools.get(call.name)
        if tool is None:
            return ToolOutcome(
                call.name, arguments, error=f"no tool {call.name!r}; the tools are {', '.join(self._tools)}"
            )
        if call.arguments is None:
            return ToolOutcome(tool.name, arguments, error="the arguments are not a JSON object")
        try:
            checked = self._check(tool, call.arguments)
        except CandidateRejected as error:
            return ToolOutcome(tool.name, arguments, error=f"refused: {error}")
        readable = tool.tables if tool.free else tuple(sorted(self._schemas))
        deadline = (
            self.limits.query_seconds
            if seconds_left is None
            else max(0.05, min(self.limits.query_seconds, seconds_left))
        )
        tables = tuple(sorted(checked.tables))
        try:
            found_columns, found_rows = self._queries.run(checked, tuple(readable), deadline)
        except EvaluationError as error:
            return ToolOutcome(
                tool.name, arguments, checked.source, tables, error=" ".join(str(error).split())[:400]
            )
        columns, rows, truncated = _bounded(found_columns, found_rows, self.limits)
        return ToolOutcome(
            tool.name, arguments, checked.source, tables, columns, rows, len(found_rows), truncated
        )

    def _check(self, tool: Tool, arguments: Mapping[str, Any]) -> CheckedQuery:
        if tool.free:
            extra = sorted(set(arguments) - {FREE_SQL_PARAMETER})
            sql = arguments.get(FREE_SQL_PARAMETER)
            if extra or not isinstance(sql, str):
                raise CandidateRejected(
                    f"{tool.name} takes one argument, {FREE_SQL_PARAMETER!r}: the query as text"
                )
            return check_query(sql, self._schemas, tool.tables, dialect=self.dialect)
        parameters = {p.name: p.type for p in tool.parameters}
        return bind_query(tool.sql or "", self._schemas, self._schemas.keys(), dialect=self.dialect,
                          parameters=parameters, arguments=arguments)  # fmt: skip

    def close(self) -> None:
        if self._owned:
            self._queries.close()

    def __enter__(self) -> ToolBox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _chat_tool(tool: Tool) -> ToolSpec:
    properties = {p.name: {"type": p.type, **({"description": p.description} if p.description else {})}
                  for p in tool.parameters}  # fmt: skip
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [p.name for p in tool.parameters if p.required]
    if required:
        schema["required"] = required
    return ToolSpec(tool.name, tool.description, schema)


def json_value(value: Any, max_chars: int) -> Any:
    """A result cell as plain JSON: numbers, text, booleans and null as they are (a non-finite float as text),
    anything else as its text; text cut at `max_chars`."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _bounded(
    columns: tuple[str, ...], rows: list[tuple[Any, ...]], limits: ToolLimits
) -> tuple[tuple[str, ...], tuple[tuple[Any, ...], ...], bool]:
    """The first rows that fit `max_rows` and `max_result_chars`, and whether any were left out or cut."""
    kept: list[tuple[Any, ...]] = []
    size, truncated = len(json.dumps(list(columns))), False
    for row in rows:
        cells = tuple(json_value(v, limits.max_cell_chars) for v in row)
        truncated = truncated or any(isinstance(v, str) and v.endswith("…") and v != r
                                     for v, r in zip(cells, row, strict=True))  # fmt: skip
        size += len(json.dumps(cells, ensure_ascii=False, default=str)) + 1
        if len(kept) >= limits.max_rows or size > limits.max_result_chars:
            return tuple(columns), tuple(kept), True
        kept.append(cells)
    return tuple(columns), tuple(kept), truncated
