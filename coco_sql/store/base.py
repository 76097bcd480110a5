"""The warehouse interface, as four small roles: a run's writes (`RunWriter`), its typed reads (`RunReader`), the
named queries (`NamedQueries`) and the registered tasks (`TaskRegistry`). The loop, the CLI, the procedures and
the reflection tools talk to these protocols only; `Warehouse` is all four, with the store's candidate engine.

Every read is written once (`store.reads`, over the named DuckDB queries of `reads_sql`, `history_sql` and
`report_sql`); an engine's store (`engines.duckdb.store.DuckDBStore`, `engines.snowflake.store.SnowparkStore`)
supplies only `execute` (one of those queries, run as written or translated), the writes (an iteration's batch,
a run's few updates, a registered task's rows), `recover`, the user's own `read_source` and its candidate engine.
Engine differences stay inside them, so the loop never branches on the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd

from coco_sql.llm.cache import CachedEmbedding, CachedResponse
from coco_sql.store.records import (
    ArchiveEntry,
    DeployUsage,
    Event,
    IterationBatch,
    LedgerEntry,
    Primitive,
    PrimitiveTrial,
    ProgramRecord,
    ProgramScore,
    RunRecord,
)
from coco_sql.store.registered import RegisteredTask

if TYPE_CHECKING:
    from coco_sql.sandbox.lockdown import QueryResult

PYTHON_HANDLER = "handle"  # the function a Python UDF's code defines: handle(instance JSON) -> answer JSON


@dataclass(frozen=True)
class QueryRows:
    """One warehouse query's result: lower-case column names, rows of plain Python values (numbers, text,
    booleans, None; an ARRAY as a list, an OBJECT or VARIANT as JSON text, as DuckDB gives LIST and JSON), and
    each column's type as the engine names it."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    types: tuple[str, ...] = ()


class CandidateEngine(Protocol):
    """A warehouse that runs candidates itself (`SnowparkStore.candidate_engine()`): every candidate, probe,
    draft test and screening query as a query over a split's staged rows, Python programs as its own UDFs."""

    dialect: str

    def stage_rows(self, split: str, rows: pd.DataFrame) -> str:
        """Copy a split's rows into a temporary table; its name."""
        ...

    def query(self, sql: str, deadline_s: float) -> QueryRows:
        """The rows of one read-only query in the engine's dialect; EvaluationError when it fails,
        EvaluationTimeout past the deadline."""
        ...

    def create_table(self, sql: str, deadline_s: float) -> str:
        """A temporary table holding the rows of one read-only query in the engine's dialect (a dbt model's
        materialisation); its name, dropped by `drop_staged`. Fails as `query` does."""
        ...

    def run_python(self, source: str, staged: str, deadline_s: float) -> list[tuple[str, str | None]]:
        """(id, JSON answer) of a temporary Python UDF with code `source` over a staged table (ID, INSTANCE)."""
        ...

    def billed_model(self, function: str, model: str | None) -> str:
        """The model a metered AI call of `function` (naming `model`, or none) is recorded under."""
        ...

    def drop_staged(self, name: str) -> None: ...

    # The candidate runner API the kinds target (Snowflake's: `engines.snowflake.queries.MeteredQueries`)

    def probes(self, tables: Mapping[str, str]) -> Any:
        """The mutator's `QueryEngine` over staged tables (relation name as probes write it -> staged table)."""
        ...

    def meter(self, tree: Any) -> Any:
        """A query's tree (in the engine's dialect) rewritten to return its AI calls' bill too: a `Metered`."""
        ...

    def run_metered(self, sql: str, metered: Any, deadline_s: float) -> QueryResult:
        """The rows of a metered query, its bill as `usage`."""
        ...

    def embedder(self, model: str) -> Callable[[Sequence[str]], Any]:
        """Texts -> vectors by the engine's own AI_EMBED of `model` (a `linear_head.Embed`)."""
        ...


class RunWriter(Protocol):
    """A run's writes: its id and row, each iteration's batch, the repair before a resume, a run's few updates and
    its progress row. The only role that changes a run's tables."""

    write_behind: bool
    """True when `write_iteration` may run in a second thread while the loop goes on (DuckDB)."""

    def next_run_id(self) -> int:
        """The id a new run gets: one past the largest run id in the store."""
        ...

    def create_run(self, run: RunRecord) -> None:
        """Insert a run row (status 'running'). The loop does not call it: a new run's row travels with its
        seed's batch (`IterationBatch.new_run`), so a run whose seed fails leaves no row."""
        ...

    def write_iteration(self, batch: IterationBatch) -> None:
        """Commit one iteration's rows as a single transaction (all or nothing), a new run's row (`new_run`, with
        its seed's batch) first."""
        ...

    def recover(self, run_id: int) -> None:
        """Delete what an interrupted `write_iteration` of the run left. A no-op where `write_iteration` is one
        transaction (DuckDB); needed where it is not (Snowflake). Called before a run resumes."""
        ...

    def set_budget(self, run_id: int, budget: int) -> None:
        """Change a run's budget and mark it running again (resume with a larger budget)."""
        ...

    def set_config(self, run_id: int, config: Mapping[str, Any]) -> None:
        """Replace a run's stored configuration (`runs.config`; resume with a new `max_spend` or prices)."""
        ...

    def set_progress(self, row: Mapping[str, Any]) -> None:
        """Replace run `row['run_id']`'s row of `coco_progress` (the columns of `sql/schema.sql`), committed at
        once: another connection polls it while the run goes on (`procedures.progress`)."""
        ...


class RunReader(Protocol):
    """A run as the loop rebuilds it on resume and the read models show it: typed records, by iteration."""

    def get_run(self, run_id: int) -> RunRecord:
        """Raise StoreError naming the id when absent."""
        ...

    def latest_run_id(self, task: str | None = None) -> int | None:
        """The newest run (of `task`, if given), or None."""
        ...

    def last_iteration(self, run_id: int) -> int:
        """The largest committed iteration of a run, or -1 if none is."""
        ...

    def programs(self, run_id: int) -> list[ProgramRecord]:
        """All programs of a run, by iteration."""
        ...

    def program(self, program_id: str) -> ProgramRecord:
        """Raise StoreError naming the id when absent."""
        ...

    def program_scores(self, run_id: int, split: str) -> dict[str, ProgramScore]:
        """program_id -> aggregate score on `split`."""
        ...

    def row_scores(
        self, run_id: int, split: str, program_id: str | None = None
    ) -> dict[str, dict[str, float]]:
        """program_id -> {instance_id: score} over the run's evaluations on `split` (loaded on resume); only
        `program_id`'s when given."""
        ...

    def archive_entries(self, run_id: int) -> list[ArchiveEntry]:
        """Every archive landing of a run, in landing order."""
        ...

    def ledger(self, run_id: int) -> list[LedgerEntry]:
        """The run's ledger, by iteration."""
        ...

    def events(self, run_id: int, kind: str) -> list[Event]:
        """The run's events of one kind, by iteration."""
        ...

    def primitives(self, run_id: int) -> list[Primitive]:
        """The run's primitive library, by created_iteration, then name (the library's own order)."""
        ...

    def primitive_trials(self, run_id: int) -> list[PrimitiveTrial]:
        """The run's primitive operator trials, by iteration (loaded on resume to rebuild the posteriors)."""
        ...


class NamedQueries(Protocol):
    """The named, parameterised queries (history tools, read models) and the reads that are not one run's state.
    There is no raw SQL here: a read is a named query (a store's own `query` method, for tests and scripts, is not
    part of the protocol)."""

    def history(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run the named history query of `coco_sql.store.history_sql.QUERIES` with named parameters.

        Each query takes exactly the `$name` parameters it mentions; `params` may hold more (ignored) but not
        fewer. Rows come back as dicts of plain JSON-able Python values (numbers, str, bool, None, lists,
        ISO-format timestamps). Raises StoreError for an unknown query name or a missing parameter.
        """
        ...

    def report(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run the named report query of `coco_sql.store.report_sql.QUERIES` (as `history`, for the read models
        of `coco_sql.report`)."""
        ...

    def deploy_usage(self, run_id: int) -> dict[str, DeployUsage]:
        """program_id -> what its validation evaluation used (`DeployUsage`), for every program of the run with a
        validation score; a program without AI calls has calls 0 and no models."""
        ...

    def ai_cache_entries(self) -> tuple[list[CachedResponse], list[CachedEmbedding]]:
        """Every cached AI response and embedding in the store (shared by all its runs)."""
        ...


class TaskRegistry(Protocol):
    """Tasks registered from the user's own tables (`coco_task`): reading the source, storing its rows."""

    def read_source(self, source: str) -> tuple[pd.DataFrame, dict[str, str]]:
        """The rows of a user's table or query (a task's source) and its columns' types; StoreError if it fails.
        The store's one method that runs the user's own SQL (never a candidate's)."""
        ...

    def register_task(
        self,
        name: str,
        source: str,
        options: Mapping[str, Any],
        types: Mapping[str, str],
        rows: pd.DataFrame,
        test_rows: pd.DataFrame | None = None,
    ) -> None:
        """Store a task's options and its rows as they are now (`tasks`, `task_rows`), the rows of its option
        `test_source` after them (`store.registered`); StoreError when a run has used the name."""
        ...

    def registered_task(self, name: str) -> RegisteredTask | None:
        """What `coco_task` stored in this store under `name`, or None."""
        ...


class Warehouse(RunWriter, RunReader, NamedQueries, TaskRegistry, Protocol):
    """A whole store: the four roles, the candidate engine it supplies, and its end."""

    def candidate_engine(self) -> CandidateEngine | None:
        """The warehouse itself when it runs candidate SQL (Snowflake: Cortex is its AI), else None (candidates
        run in the local DuckDB sandbox)."""
        ...

    def close(self) -> None: ...


ROLES: tuple[type, ...] = (RunWriter, RunReader, NamedQueries, TaskRegistry)
