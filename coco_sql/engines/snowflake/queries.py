"""The candidate runner API of a warehouse engine (Snowflake), over a `store.base.CandidateEngine`: what every
kind that runs on the warehouse targets (the SQL kind's programs, the probes of the python, dbt and agent-spec
kinds), reached through the candidate engine's own methods (`MeteredQueries`), never by importing this module.

`WarehouseQueries` is the same split's query engine for the mutator's probes, draft tests and screening queries
(the evaluator's `probe`): they are written in DuckDB, with AI calls bound as the validator binds them; here
they are turned back into Cortex's calls (`ai_binding.unbind_ai_calls`), written in Snowflake's dialect by
sqlglot, metered like candidates, and run over the staged rows. DuckDB's identifiers are case-insensitive, so a
quoted plain identifier of a probe is unquoted for Snowflake (where a quoted name keeps its case). A probe may
read the split's relations only (and its own CTEs): on a warehouse other tables exist.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import traverse_scope

from coco_sql.engines.snowflake.meter import Metered, meter
from coco_sql.errors import EvaluationError
from coco_sql.llm.routing import CORTEX_EMBEDDING_MODEL
from coco_sql.sandbox.lockdown import QueryResult
from coco_sql.sqlkit.ai_binding import unbind_ai_calls
from coco_sql.sqlkit.nodes import function_name, positional_arguments
from coco_sql.sqlkit.relations import over_source

if TYPE_CHECKING:
    from coco_sql.store.base import CandidateEngine

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class MeteredQueries:
    """The candidate runner API a warehouse's `CandidateEngine` offers the kinds (mixed into it): probes over
    staged tables, the meter of a query's AI calls, a metered query's rows and bill, and the warehouse's own
    AI_EMBED. Needs the engine's `dialect`, `query`, `stage_rows`, `drop_staged` and `billed_model`."""

    def probes(self: CandidateEngine, tables: Mapping[str, str]) -> WarehouseQueries:
        """The mutator's query engine over staged tables (`input`, `examples` -> the staged table's name)."""
        return WarehouseQueries(self, tables)

    def meter(self, tree: exp.Expression) -> Metered:
        """`tree` (in the engine's dialect) rewritten to return its AI calls' bill too (`engines.snowflake.meter`)."""
        return meter(tree)

    def run_metered(self: CandidateEngine, sql: str, metered: Metered, deadline_s: float) -> QueryResult:
        """The rows of a metered query (its meter's columns last), with the bill as `usage`."""
        return run_metered(self, sql, metered, deadline_s)

    def embedder(self: CandidateEngine, model: str) -> Callable[[Sequence[str]], np.ndarray]:
        """`linear_head.Embed` by the warehouse's own AI_EMBED (`warehouse_embed`)."""
        return warehouse_embed(self, model)


class WarehouseQueries:
    """Read-only queries over a split's staged tables, for the mutator (module docstring): a `QueryEngine`."""

    dialect = "snowflake"  # the dialect its results are described in (the QueryEngine protocol)

    def __init__(self, engine: CandidateEngine, tables: Mapping[str, str]) -> None:
        """`tables`: relation name as probes write it (`input`, `examples`) -> its staged table."""
        self._engine = engine
        self._tables = dict(tables)

    def statement_types(self, sql: str) -> list[str]:
        try:
            statements = [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]
        except SqlglotError as error:
            raise EvaluationError(" ".join(str(error).split())[:300]) from None
        return ["SELECT" if isinstance(s, exp.Query) else type(s).__name__.upper() for s in statements]

    def run(self, sql: str, deadline_s: float, on_timeout: Callable[[], None] | None = None) -> QueryResult:
        metered = meter(sqlglot.parse_one(self.warehouse_sql(sql), read=self._engine.dialect))
        found = run_metered(
            self._engine, metered.query.sql(dialect=self._engine.dialect), metered, deadline_s
        )
        return found.without_last(len(metered.columns))

    def warehouse_sql(self, sql: str) -> str:
        """A probe's DuckDB text as the warehouse runs it (module docstring)."""
        try:
            tree = sqlglot.parse_one(sql, read="duckdb")
        except SqlglotError as error:
            raise EvaluationError(f"probe does not parse: {' '.join(str(error).split())[:300]}") from None
        if not isinstance(tree, exp.Query):
            raise EvaluationError(f"a probe must be one SELECT, got {type(tree).__name__}")
        _check_relations(tree, set(self._tables))
        tree = unbind_ai_calls(tree)
        for node in tree.find_all(exp.Func):
            args = positional_arguments(node)
            if function_name(node) == "AI_EMBED" and args and args[0].is_string and args[0].name == "":
                args[0].replace(exp.Literal.string(CORTEX_EMBEDDING_MODEL))  # the run's model: Cortex's
        for identifier in tree.find_all(exp.Identifier):
            if identifier.quoted and _PLAIN_NAME.fullmatch(identifier.name):
                identifier.set("quoted", False)
        for relation, table in self._tables.items():
            tree = over_source(tree, table, relation)
        return tree.sql(dialect=self._engine.dialect)

    def close(self) -> None:
        """The staged tables belong to the runner that made them."""


def warehouse_embed(
    engine: CandidateEngine, model: str, deadline_s: float = 600.0
) -> Callable[[Sequence[str]], np.ndarray]:
    """`linear_head.Embed` by the warehouse's own AI_EMBED (`model`, in the engine's dialect): the texts staged as
    rows and embedded in one query, so that a head fitted on them reads the vectors the programs' AI_EMBED gives
    there. Its calls are not accounted in any evaluation: the head is a property of the task, like `examples`."""

    def embed(texts: Sequence[str]) -> np.ndarray:
        rows = pd.DataFrame({"pos": range(len(texts)), "text": [str(t) for t in texts]})
        table = engine.stage_rows("head_texts", rows)
        try:
            call = exp.Anonymous(this="AI_EMBED", expressions=[exp.Literal.string(model), exp.column("text")])
            sql = exp.select("pos", call.as_("v")).from_(table).order_by("pos").sql(dialect=engine.dialect)
            found = engine.query(sql, deadline_s)
        finally:
            engine.drop_staged(table)
        return np.asarray(
            [json.loads(v) if isinstance(v, str) else list(v) for _, v in found.rows], np.float32
        )

    return embed


def _check_relations(tree: exp.Query, allowed: set[str]) -> None:
    """EvaluationError unless every relation the probe reads is one of the split's (`input`, `examples`) or its
    own CTE: on a warehouse, unlike in the DuckDB sandbox, other tables exist (the user's source, the run's
    tables), and a probe must not see a validation or test row."""
    for scope in traverse_scope(tree):
        for source in scope.sources.values():
            if isinstance(source, exp.Table) and (
                source.name.lower() not in allowed or source.db or not isinstance(source.this, exp.Identifier)
            ):
                raise EvaluationError(
                    f"a probe may read only {', '.join(sorted(allowed))} (and its own CTEs), not "
                    f"{source.sql(dialect='duckdb')[:80]}"
                )


def run_metered(engine: CandidateEngine, sql: str, metered: Metered, deadline_s: float) -> QueryResult:
    """Run `sql` (a metered query, its meter's columns last); its rows, with the bill as `usage`."""
    started = time.perf_counter()
    found = engine.query(sql, deadline_s)
    elapsed_ms = (time.perf_counter() - started) * 1000
    if elapsed_ms > deadline_s * 1000:
        raise EvaluationError(f"query exceeded its {deadline_s:g} s deadline")
    usage = None
    if metered.sites:
        index = {name: k for k, name in enumerate(found.columns)}
        values = {c: [row[index[c]] for row in found.rows] for c in metered.columns if c in index}
        usage = metered.usage(values, engine.billed_model)
    return QueryResult(found.columns, found.rows, elapsed_ms, found.types, usage)
