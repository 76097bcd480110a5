"""SQL programs: sqlglot validation (`sqlkit`), the DuckDB worker sandbox (`sandbox`), AST features and
the offline SQL mutator (`languages.sql.mutate.offline`).

The task's dialect (duckdb or snowflake) is a validator setting: Snowflake SQL is transpiled to DuckDB before it
runs locally. The engine a program runs on is the runner's business, not the loop's: the DuckDB sandbox, or the
warehouse when the store runs candidates itself (`warehouse`, Snowflake).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

from coco_sql.errors import EvaluationError
from coco_sql.languages.base import Program, RunResult
from coco_sql.languages.sql.linear_head import embed_model, embedded_tables, head_columns, head_tables
from coco_sql.languages.sql.warehouse import WarehouseSqlRunner
from coco_sql.sandbox.database import QueryResult, Sandbox
from coco_sql.search.features import cell_of_counts
from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.macros import expand_program, has_macro_word
from coco_sql.sqlkit.validate import validate_candidate
from coco_sql.tasks.references import reference_columns, reference_tables

if TYPE_CHECKING:
    from coco_sql.core.ai_table import LocalFunctions
    from coco_sql.store.base import CandidateEngine
    from coco_sql.tasks import Split, TaskPack


class SqlLanguage:
    name = "sql"

    def __init__(self, task: TaskPack, engine: CandidateEngine | None = None) -> None:
        """`engine`: a warehouse that runs the programs itself (Snowflake); by default they run in the DuckDB
        sandbox."""
        self.task = task
        self.engine = engine
        self.spec = ValidationSpec(
            input_columns=dict(task.input_columns),
            output_column=task.contract.output,
            allowed_functions=frozenset(task.allowed_functions),
            dialect=task.dialect,
            references={**reference_columns(task), **head_columns(task)},
            output_type=task.contract.type,
        )
        self._heads: dict[str, object] = {}  # the head table's rows by what they depend on (`linear_head`)

    @property
    def reference_tables(self) -> frozenset[str]:
        """The tables a program may read beside `input` (`examples`, the head's tables)."""
        return frozenset(self.spec.references)

    def validate(self, code: str) -> Program:
        """A program may carry its primitives as DuckDB scalar macros before its one query
        (`sqlkit.macros`): they are expanded inline first, and every check runs on the query as it
        will run. `source` keeps the macros and their calls; `runnable` and `tree` are the expanded query."""
        if has_macro_word(code):
            expanded = expand_program(code, self.spec.dialect)
            if expanded is not None:
                checked = validate_candidate(expanded, self.spec)
                return Program(self.name, code, checked.sql, checked.expression)
        checked = validate_candidate(code, self.spec)
        return Program(self.name, code, checked.sql, checked.expression)

    def cell(self, program: Program) -> str:
        query: exp.Expression = program.tree
        nodes = sum(1 for _ in query.walk())
        branches = (
            sum(len(case.args.get("ifs") or []) for case in query.find_all(exp.Case))
            + sum(1 for _ in query.find_all(exp.CTE))
            + sum(1 for f in query.find_all(exp.Func) if _is_ai_call(f))
        )
        return cell_of_counts(nodes, branches)

    def runner(self, split: Split, ai: LocalFunctions | None) -> SqlRunner | WarehouseSqlRunner:
        if self.engine is not None:  # the head fitted on the warehouse's own AI_EMBED vectors
            heads = embedded_tables(
                self.task, self.engine.embedder(embed_model(self.task.dialect)), self._heads
            )
            return WarehouseSqlRunner(
                self.engine,
                split,
                self.spec,
                self.task.contract.type,
                {**reference_tables(self.task), **heads},
            )
        tables = {**reference_tables(self.task), **head_tables(self.task, ai, self._heads)}
        return SqlRunner(Sandbox(split.inputs, ai=ai, tables=tables), self.task.contract.output)


class SqlRunner:
    """Runs validated SQL in the split's DuckDB sandbox, which also serves the data probes of every language."""

    def __init__(self, sandbox: Sandbox, output_column: str) -> None:
        self.probe_sandbox = sandbox
        self._output = output_column.replace('"', '""')

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult:
        kinds = self.probe_sandbox.statement_types(program.runnable)
        if kinds != ["SELECT"]:
            raise EvaluationError(f"rejected: DuckDB reads this as {', '.join(kinds)}, not one SELECT")
        wrapped = f'SELECT CAST(id AS VARCHAR) AS id, "{self._output}" AS output FROM ({program.runnable}) AS candidate'
        result = self.probe_sandbox.run(wrapped, deadline_s, on_timeout=on_timeout)
        return RunResult(result.rows, result.elapsed_ms)

    def select(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> QueryResult:
        """Every column the program's query selects, on the split's rows (a proxy's confidence beside its
        output: `reflect.environment.DraftEnvironment.program_columns`)."""
        wrapped = f"SELECT * FROM ({program.runnable}) AS candidate"
        return self.probe_sandbox.run(wrapped, deadline_s, on_timeout=on_timeout)

    def close(self) -> None:
        self.probe_sandbox.close()


def _is_ai_call(node: exp.Func) -> bool:
    name = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
    return name.upper().startswith("AI_")
