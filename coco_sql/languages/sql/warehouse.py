"""SQL programs and the mutator's probes run as warehouse queries (Snowflake): the runner the SQL language uses
when the store executes candidates itself (`Warehouse.candidate_engine()`), so that AI functions are the
warehouse's own (Cortex) and no process is started (a stored procedure may not start one).

The candidate has passed the same validator as on DuckDB (one read-only query of `input`, allowed functions only).
It is written in the task's dialect and goes to Snowflake from that text, not from the DuckDB tree the validator
made: only `input` is renamed to the split's staged table, on the sqlglot tree (and a reference table such as
`examples` to its own staged copy of the training rows). The staged table holds the split's rows and nothing else,
so a program can reach no other split. The warehouse enforces the deadline (the statement timeout) and the
memory bound. Its AI calls are billed by the query itself (the engine's meter, `CandidateEngine.meter`): the result carries
each call site's rows and tokens, which become the evaluation's usage.

The split's probes run on the engine's own query runner (`CandidateEngine.probes`, Snowflake's:
`engines.snowflake.queries`), over the same staged tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd
import sqlglot
from sqlglot import exp

from coco_sql.bounded import json_value
from coco_sql.languages.base import Program, RunResult
from coco_sql.sandbox.lockdown import QueryResult
from coco_sql.sqlkit.checks import as_query
from coco_sql.sqlkit.macros import expand_program
from coco_sql.sqlkit.named_arguments import rewrite_named_arguments
from coco_sql.sqlkit.parsing import parse_statement
from coco_sql.sqlkit.relations import over_source
from coco_sql.store.base import CandidateEngine

if TYPE_CHECKING:
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
        self.probe_sandbox = engine.probes({"input": self._table, **self._references})

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
        result = self._engine.run_metered(wrapped.sql(dialect=self._engine.dialect), metered, deadline_s)
        outputs = [(str(row[0]), self._value(row[1])) for row in result.rows]
        return RunResult(outputs, result.elapsed_ms, usage=result.usage)

    def select(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> QueryResult:
        """Every column the program's query selects, run as a program runs here (its own dialect, metered), not
        as a probe's DuckDB text: `SqlRunner.select`."""
        metered = self.metered(expand_program(program.source, self._spec.dialect) or program.source)
        found = self._engine.run_metered(metered.query.sql(dialect=self._engine.dialect), metered, deadline_s)
        return found.without_last(len(metered.columns))

    def metered(self, source: str) -> Any:
        """The candidate over the staged rows, in the engine's dialect, with its AI calls' meter (a DuckDB-dialect
        task's program is generated in the engine's dialect by sqlglot from the same tree)."""
        tree = rewrite_named_arguments(parse_statement(source, self._spec.dialect))
        query, _ = as_query(tree, self._spec)
        staged = over_source(query, self._table)
        for name, table in self._references.items():
            staged = over_source(staged, table, name)
        return self._engine.meter(
            sqlglot.parse_one(staged.sql(dialect=self._engine.dialect), read=self._engine.dialect)
        )

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
