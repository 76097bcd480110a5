"""A data agent run inside the warehouse (Snowflake): what the kind uses when the store runs candidates itself
(`store.base.CandidateEngine`), so that a run inside a stored procedure starts no process and opens no socket.

**Tools.** `WarehouseToolQueries` runs each tool query as one read-only warehouse query through the engine, over
the task's tables staged there as temporary tables (`CandidateEngine.stage_rows`; the documents table too). A
query has passed the same checks as locally first (`toolsql`: one read-only statement, allow-listed functions,
only the tables the tool may read, every column resolved), and goes to the warehouse from the text it was
checked as (the task's dialect, a parameterised tool's arguments bound as literals), not from the DuckDB text the
sandbox would run: each table it reads is renamed to its staged copy on the sqlglot tree (a CTE of the same name
stays a CTE) and the tree is generated in the engine's dialect. A relation that is not a staged table (another
schema's table, a name the checks did not see) is refused before the query is sent, since a warehouse, unlike
the sandbox, holds other tables. Quoted plain identifiers are unquoted (the staged columns are upper case; a
DuckDB-dialect query's ``"fee"`` means the column ``fee``). An error message names the task's tables, not their
staged copies, whose names are random: the model reads the message, the trace keeps it, and a resumed run
must see the same text. The tables are staged once per binding of the kind, when a query first reads them, and
dropped when the last runner that shares them closes.

**Chat.** The turns go to Cortex through the procedure's session: the model must route to the `cortex`
endpoint (``cortex:<model>``, or a bare Cortex name, which a procedure's configuration sends there), checked
before the first question (`cortex_model`). `llm.providers.cortex` calls ``SNOWFLAKE.CORTEX.COMPLETE(model,
<conversation>, <options>)``; COMPLETE's documented options are temperature, top_p, max_tokens, guardrails and
response_format, and its conversation has only system, user and assistant turns: no tools. So the tools travel
in our own prompted protocol (`llm.providers.tool_wire`: their specs and a JSON reply form in the system turn,
each tool result a user turn), as for any model without native tool calling, and the loop and the cache are the
local ones (`runtime`): the response cache keys each whole request, so a resumed run replays exactly.

The Cortex Agents run API is not used for the search: its SQL wrappers (SNOWFLAKE.CORTEX.DATA_AGENT_RUN for an
agent object, AGENT_RUN without one) are callable from SQL without a REST client (docs "DATA_AGENT_RUN
(SNOWFLAKE.CORTEX)", "Cortex Agents run API"), but Snowflake runs the orchestration and the tools there, so
there is no request of ours to cache and replay, and the trace is in its format.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import traverse_scope

from coco_sql.errors import ConfigError, EvaluationError
from coco_sql.plugin_loader import DEPLOY_DIALECT

if TYPE_CHECKING:
    from coco_sql.languages.agent_spec.toolsql import CheckedQuery
    from coco_sql.llm.routing import AiConfig
    from coco_sql.sandbox.lockdown import QueryResult
    from coco_sql.store.base import CandidateEngine

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STAGED_PREFIX = "agent_"  # a staged table's split label (`stage_rows`): COCO_INPUT_AGENT_<TABLE>_<random>


class WarehouseToolQueries:
    """A `tools.ToolQueries` over the task's tables staged in the warehouse (module docstring). Shared by the
    runners of one binding: each `acquire`s it and `release`s it when it closes; the last release drops the
    staged tables."""

    def __init__(self, engine: CandidateEngine, tables: Mapping[str, pd.DataFrame], dialect: str) -> None:
        """`tables`: the task's tables by name (the agent's, and ``documents``); `dialect`: the task's, which
        the tool queries are written in."""
        self.engine = engine
        self._rows = {name.lower(): frame for name, frame in tables.items()}
        self._dialect = dialect
        self._staged: dict[str, str] = {}  # table name -> its staged copy
        self._users = 0
        self.queries = 0  # queries sent to the warehouse (a measure of what a run costs there)

    def acquire(self) -> WarehouseToolQueries:
        self._users += 1
        return self

    def release(self) -> None:
        self._users = max(0, self._users - 1)
        if self._users == 0:
            self.close()

    def run(
        self, checked: CheckedQuery, readable: tuple[str, ...], deadline_s: float
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        sql = self.warehouse_sql(checked.source, readable)
        self.queries += 1
        try:
            found = self.engine.query(sql, deadline_s)
        except EvaluationError as error:
            raise type(error)(self._named(str(error))) from None
        return found.columns, found.rows

    def warehouse_sql(self, source: str, readable: tuple[str, ...]) -> str:
        """`source` (checked, in the task's dialect) over the staged copies of the tables it reads, in the
        engine's dialect; EvaluationError for a relation that is not one of `readable`."""
        try:
            tree = sqlglot.parse_one(source, read=self._dialect)
        except SqlglotError as error:
            raise EvaluationError(f"the query does not parse: {' '.join(str(error).split())[:300]}") from None
        allowed = {name.lower() for name in readable}
        tables: list[exp.Table] = []
        for scope in traverse_scope(tree):
            for table in scope.tables:
                if not isinstance(table.this, exp.Identifier) or (
                    table.name in scope.cte_sources and not table.db
                ):
                    continue  # a table function the checks allowed (FLATTEN), or the query's own CTE
                if table.name.lower() not in allowed or table.db:
                    shown = table.sql(dialect=self._dialect)[:80]
                    raise EvaluationError(f"the tool may read only {', '.join(sorted(allowed))}, not {shown}")
                tables.append(table)
        for table in tables:
            staged = exp.to_table(self._stage(table.name.lower()))
            staged.set("alias", table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(table.name)))
            table.replace(staged)
        for identifier in tree.find_all(exp.Identifier):
            if identifier.quoted and _PLAIN_NAME.fullmatch(identifier.name):
                identifier.set("quoted", False)
        return tree.sql(dialect=self.engine.dialect)

    def close(self) -> None:
        staged, self._staged = self._staged, {}
        for name in staged.values():
            self.engine.drop_staged(name)

    def _stage(self, name: str) -> str:
        if name not in self._staged:
            self._staged[name] = self.engine.stage_rows(f"{STAGED_PREFIX}{name}", stageable(self._rows[name]))
        return self._staged[name]

    def _named(self, message: str) -> str:
        """`message` with each staged copy's name replaced by its table's."""
        for name, staged in self._staged.items():
            message = re.sub(re.escape(staged), name, message, flags=re.IGNORECASE)
        return message


class SplitProbes:
    """The mutator's probes (`languages.base.QueryEngine`: the coding agent's `query` tool) over one split's
    question rows as the relation ``input``, staged in the warehouse on the first probe and dropped by `close`:
    inside a procedure the evaluator's own DuckDB sandbox would start a process."""

    dialect = DEPLOY_DIALECT

    def __init__(self, engine: CandidateEngine, split: str, rows: pd.DataFrame) -> None:
        self._engine = engine
        self._split = split
        self._rows = rows
        self._staged: str | None = None

    def statement_types(self, sql: str) -> list[str]:
        return self._queries(stage=False).statement_types(sql)

    def run(self, sql: str, deadline_s: float, on_timeout: Callable[[], None] | None = None) -> QueryResult:
        return self._queries(stage=True).run(sql, deadline_s, on_timeout)

    def close(self) -> None:
        staged, self._staged = self._staged, None
        if staged is not None:
            self._engine.drop_staged(staged)

    def _queries(self, *, stage: bool) -> Any:
        if stage and self._staged is None:
            self._staged = self._engine.stage_rows(self._split, stageable(self._rows))
        return self._engine.probes({"input": self._staged} if self._staged else {})


def stageable(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with pandas' nullable columns (``boolean``, ``Int64``, ``string``: what DuckDB's CSV reader gives a
    column with nulls) as plain objects and None for a missing value, which Snowpark reads as NULL; the other
    columns as they are."""
    plain = {}
    for column in frame.columns:
        values = frame[column]
        if isinstance(values.dtype, pd.api.extensions.ExtensionDtype):
            values = values.astype(object).where(values.notna(), None)
        plain[column] = values
    return pd.DataFrame(plain, index=frame.index)


def cortex_model(config: AiConfig, model: str, task: str) -> str:
    """`model` when it routes to Cortex COMPLETE through the session; else ConfigError (one line): inside the
    warehouse no other model can be reached (no socket, no process)."""
    from coco_sql.llm.routing import CORTEX_ENDPOINT

    try:
        endpoint, _ = config.route(model)
    except ConfigError:
        endpoint = None
    if endpoint != CORTEX_ENDPOINT:
        raise ConfigError(
            f"task {task!r}: inside Snowflake a data agent's model is Cortex COMPLETE, and {model!r} is not one: "
            "name a Cortex model as the task's [agent_spec] model (a resume uses it too) or in the run's options, "
            "e.g. {'completion_model': 'cortex:mistral-large2'}"
        )
    return model
