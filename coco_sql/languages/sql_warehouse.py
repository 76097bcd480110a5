"""SQL programs run as warehouse queries (Snowflake): the runner the SQL language uses when the store executes
candidates itself (`Warehouse.candidate_engine()`), so that AI functions are the warehouse's own (Cortex).

The candidate has passed the same validator as on DuckDB (one read-only query of `input`, allowed functions only).
It is written in the task's dialect and goes to Snowflake from that text, not from the DuckDB tree the validator
made: only `input` is renamed to the split's staged table, on the sqlglot tree (and a reference table such as
`examples` to its own staged copy of the training rows). The staged table holds the split's rows and nothing else,
so a program can reach no other split. The warehouse enforces the deadline (the
statement timeout) and the memory bound.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from coco_sql.errors import EvaluationError
from coco_sql.languages.base import Program, RunResult
from coco_sql.languages.sql_export import over_source
from coco_sql.primitives.sql_macros import expand_program
from coco_sql.sqlcheck.validator import as_query, parse_statement, rewrite_named_arguments
from coco_sql.store.base import CandidateEngine

if TYPE_CHECKING:
    import pandas as pd

    from coco_sql.sqlcheck import ValidationSpec
    from coco_sql.tasks import Split


class WarehouseSqlRunner:
    """One split's rows staged in the warehouse; runs programs over them there."""

    probe_sandbox = None  # the mutator's data probes keep their DuckDB sandbox over the same rows

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

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult:
        # a program's primitives (DuckDB macros) run inlined: a warehouse has no macros
        sql = self.warehouse_sql(expand_program(program.source, self._spec.dialect) or program.source)
        started = time.perf_counter()
        frame = self._engine.run_candidate(sql, deadline_s)
        elapsed_ms = (time.perf_counter() - started) * 1000
        if elapsed_ms > deadline_s * 1000:
            raise EvaluationError(f"query exceeded its {deadline_s:g} s deadline")
        outputs = [
            (str(i), self._value(v)) for i, v in frame[["id", "output"]].itertuples(index=False, name=None)
        ]
        return RunResult(outputs, elapsed_ms)

    def warehouse_sql(self, source: str) -> str:
        """The candidate over the staged rows, as the wrapped query the warehouse runs (a DuckDB-dialect task's
        program is generated in the engine's dialect by sqlglot from the same tree)."""
        tree = rewrite_named_arguments(parse_statement(source, self._spec.dialect))
        query, _ = as_query(tree, self._spec)
        staged = over_source(query, self._table)
        for name, table in self._references.items():
            staged = over_source(staged, table, name)
        wrapped = exp.select(
            exp.cast(exp.column("id"), "VARCHAR").as_("id"),
            exp.column(self._spec.output_column).as_("output"),  # unquoted: Snowflake folds the alias too
        ).from_(staged.subquery("candidate"))
        return wrapped.sql(dialect=self._engine.dialect)

    def _value(self, value: Any) -> Any:
        """A cell as the DuckDB sandbox would give it: ARRAY/VARIANT arrive as JSON text, numbers as numpy."""
        if hasattr(value, "item"):
            return value.item()
        if self._list_output and isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value

    def close(self) -> None:
        for table in (self._table, *self._references.values()):
            self._engine.drop_staged(table)
