"""SQL programs and the mutator's probes run as warehouse queries (Snowflake): the runner the SQL language uses
when the store executes candidates itself (`Warehouse.candidate_engine()`), so that AI functions are the
warehouse's own (Cortex) and no process is started (a stored procedure may not start one).

The candidate has passed the same validator as on DuckDB (one read-only query of `input`, allowed functions only).
It is written in the task's dialect and goes to Snowflake from that text, not from the DuckDB tree the validator
made: only `input` is renamed to the split's staged table, on the sqlglot tree (and a reference table such as
`examples` to its own staged copy of the training rows). The staged table holds the split's rows and nothing else,
so a program can reach no other split. The warehouse enforces the deadline (the statement timeout) and the
memory bound. Its AI calls are billed by the query itself (`meter`): the result carries each call site's
rows and tokens, which become the evaluation's usage.

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
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import traverse_scope

from coco_sql.bounded import json_value
from coco_sql.errors import EvaluationError
from coco_sql.languages.base import Program, RunResult
from coco_sql.languages.sql.export.forms import over_source
from coco_sql.languages.sql.meter import Metered, meter
from coco_sql.llm.routing import CORTEX_EMBEDDING_MODEL
from coco_sql.sandbox.lockdown import QueryResult
from coco_sql.sqlkit.ai_binding import unbind_ai_calls
from coco_sql.sqlkit.checks import as_query
from coco_sql.sqlkit.macros import expand_program
from coco_sql.sqlkit.named_arguments import rewrite_named_arguments
from coco_sql.sqlkit.nodes import function_name, positional_arguments
from coco_sql.sqlkit.parsing import parse_statement
from coco_sql.store.base import CandidateEngine

if TYPE_CHECKING:
    from coco_sql.languages.sql.linear_head import Embed
    from coco_sql.sqlkit.checks import ValidationSpec
    from coco_sql.tasks import Split

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class WarehouseSqlRunner:
    """One split's rows staged in the warehouse; runs programs over them there, and serves the split's probes
    (`probe_sandbox`, over the same staged tables)."""

    def __init__(
        self,
        engine: CandidateEngine,
        split: Split,
        spec: ValidationSpec,
        output_type: str,
        references: Mapping[str, pd.DataFrame] | None = None,
    ) -> None:
        """`references`: the task's reference tables (`tasks.references`), staged beside the split's rows."""
        self._engine = engine
        self._spec = spec
        self._list_output = output_type.endswith("[]") or output_type.upper() in ("JSON", "VARIANT")
        self._table = engine.stage_rows(split.name, split.inputs)
        self._references = {
            name: engine.stage_rows(f"{split.name}_{name}", rows) for name, rows in (references or {}).items()
        }
        self.probe_sandbox = WarehouseQueries(engine, {"input": self._table, **self._references})

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult:
        # a program's primitives (DuckDB macros) run inlined: a warehouse has no macros
        metered = self.metered(expand_program(program.source, self._spec.dialect) or program.source)
        wrapped = exp.select(
            exp.cast(exp.column("id"), "VARCHAR").as_("id"),
            exp.column(self._spec.output_column).as_("output"),  # unquoted: Snowflake folds the alias too
            *(exp.column(c) for c in metered.columns),
        ).from_(metered.query.subquery("candidate"))
        result = run_metered(self._engine, wrapped.sql(dialect=self._engine.dialect), metered, deadline_s)
        outputs = [(str(row[0]), self._value(row[1])) for row in result.rows]
        return RunResult(outputs, result.elapsed_ms, usage=result.usage)

    def select(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> QueryResult:
        """Every column the program's query selects, run as a program runs here (its own dialect, metered), not
        as a probe's DuckDB text: `SqlRunner.select`."""
        metered = self.metered(expand_program(program.source, self._spec.dialect) or program.source)
        found = run_metered(
            self._engine, metered.query.sql(dialect=self._engine.dialect), metered, deadline_s
        )
        keep = len(found.columns) - len(metered.columns)
        return QueryResult(
            found.columns[:keep], [row[:keep] for row in found.rows], found.elapsed_ms, found.types[:keep],
            found.usage,
        )  # fmt: skip

    def metered(self, source: str) -> Metered:
        """The candidate over the staged rows, in the engine's dialect, with its AI calls' meter (a DuckDB-dialect
        task's program is generated in the engine's dialect by sqlglot from the same tree)."""
        tree = rewrite_named_arguments(parse_statement(source, self._spec.dialect))
        query, _ = as_query(tree, self._spec)
        staged = over_source(query, self._table)
        for name, table in self._references.items():
            staged = over_source(staged, table, name)
        return meter(sqlglot.parse_one(staged.sql(dialect=self._engine.dialect), read=self._engine.dialect))

    def _value(self, value: Any) -> Any:
        """A cell as the DuckDB sandbox would give it: ARRAY/VARIANT arrive as JSON text, numbers as numpy."""
        if hasattr(value, "item"):
            return value.item()
        if self._list_output and isinstance(value, str):
            try:
                return json_value(value)
            except ValueError:
                return value
        return value

    def close(self) -> None:
        for table in (self._table, *self._references.values()):
            self._engine.drop_staged(table)


class WarehouseQueries:
    """Read-only queries over a split's staged tables, for the mutator (module docstring): a `QueryEngine`."""

    dialect = "snowflake"

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
        keep = len(found.columns) - len(metered.columns)
        return QueryResult(
            found.columns[:keep], [row[:keep] for row in found.rows], found.elapsed_ms, found.types[:keep],
            found.usage,
        )  # fmt: skip

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


def warehouse_embed(engine: CandidateEngine, model: str, deadline_s: float = 600.0) -> Embed:
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
