"""The kind seam: what a program kind (a language) is to the evaluator, the exports and the report. This module
holds protocols and dataclasses; it imports no kind, and none of the modules that import it (type-only either:
issue 41), so it sits below the loop.

A language turns a candidate's text into a checked `Program` (or rejects it with a one-line reason), places it
in a MAP-Elites cell, and runs it over one split's instances in a sandbox of its own. A kind ships as a
`KindPlugin` (`languages.kind`, above the loop's types): `bind` makes its `Language` for one task, and the
optional parts (export forms, highlighting, task.toml keys, a pack loader, ...) are the small protocols here,
None where the kind has none: callers ask `plugin.exports is not None`, never `getattr`. Kinds are found by name
through `coco_sql.plugins` (built-ins, and entry points of group `coco_sql.languages`). Everything else (scoring,
the archive, the ledger, the store, the history tools) is shared.

Engines are not languages: DuckDB and Snowflake are dialects inside the SQL language (`languages.sql`) and
implementations of the store; a Python program runs the same on both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from coco_sql.core.program import Program, ProgramParts, RunResult

if TYPE_CHECKING:
    from pathlib import Path

    from coco_sql.core.ai_table import LocalFunctions
    from coco_sql.sandbox.lockdown import QueryResult
    from coco_sql.store.base import CandidateEngine, Warehouse
    from coco_sql.store.records import EvaluationRow
    from coco_sql.store.registered import RegisteredTask
    from coco_sql.tasks import Split, TaskPack
    from coco_sql.tasks.pack_files import Reader

__all__ = [
    "Program",
    "ProgramParts",
    "RunResult",
]  # the values of `core.program`, named here too (the seam's)


class QueryEngine(Protocol):
    """One split's rows, queried read-only by the mutator (probes, draft tests in the engine, screening): the
    DuckDB sandbox, or a warehouse over the split's staged rows. Queries are DuckDB text; `dialect` is what the
    engine runs (a warehouse translates them: `languages.sql.warehouse`). `run` raises EvaluationError."""

    dialect: str

    def statement_types(self, sql: str) -> list[str]: ...

    def run(
        self, sql: str, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> QueryResult: ...

    def close(self) -> None: ...


class Runner(Protocol):
    """One split's instances in a sandbox; runs programs of one language over all of them.

    `run` raises EvaluationTimeout past the deadline, EvaluationMemoryError past the memory bound and
    EvaluationError for any other failure of the program as a whole; a failure on one instance is that
    instance's output being missing, which the evaluator scores as a row error.
    """

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult: ...

    def close(self) -> None: ...


class Language(Protocol):
    """One program language, bound to one task (its contract, entry point, allowed functions)."""

    name: str

    def validate(self, code: str) -> Program:
        """The checked program, or CandidateRejected with a one-line reason the mutator can act on."""
        ...

    def cell(self, program: Program) -> str:
        """The program's MAP-Elites cell: 'size bin:branching bin' of its AST."""
        ...

    def runner(self, split: Split, ai: LocalFunctions | None) -> Runner:
        """A sandbox over `split`'s instances (and nothing else)."""
        ...


@runtime_checkable
class ScoresRows(Protocol):
    """A kind whose row score depends on the row's inputs as well as its output (a DABStep answer is rounded as
    its question's guidelines ask): the evaluator scores with this instead of the task's scorer. Scoring stays
    outside the program's run: it gets the outputs, never the program."""

    def score_rows(
        self, split: Split, ids: Sequence[str], outputs: Sequence[object | None], expected: Sequence[object]
    ) -> list[float]: ...


@runtime_checkable
class AggregatesRows(Protocol):
    """A kind whose program score is not the plain mean of its row scores (dbt: per target, then weighted over
    targets and data tests): the evaluator takes an outcome's score from this. Row scores stay as they are."""

    def aggregate(self, ids: Sequence[str], scores: Sequence[float]) -> float: ...


def outcome_score(language: object, ids: Sequence[str], scores: Sequence[float]) -> float:
    """An outcome's score over rows `ids`: the kind's own (`AggregatesRows`), else the plain mean, the Python sum
    left to right, as the rows' scores were always added (`DraftScorer` relies on it); 0 without rows."""
    if not ids:
        return 0.0
    if isinstance(language, AggregatesRows):
        return language.aggregate(ids, scores)
    return sum(scores) / len(ids)


LanguageFactory = Callable[["TaskPack"], Language]


class Bind(Protocol):
    """A kind bound to one task: its `Language`, running on `engine` when the store runs candidates itself
    (Snowflake), else in coco-sql's own sandboxes."""

    def __call__(self, task: TaskPack, engine: CandidateEngine | None = None) -> Language: ...


@dataclass(frozen=True)
class ExportRequest:
    """What an export of one stored program needs, read by `api.export` from the store. `task` loads the run's
    task pack (by its name, or the one given) and raises TaskError when it is gone."""

    code: str
    dialect: str
    form: str
    name: str  # the exported object's name
    source: str  # the table the exported program reads instead of `input`
    task: Callable[[], TaskPack]
    fingerprint: str  # the run's task fingerprint
    run_id: int
    source_types: Mapping[str, str] | None = None  # a registered task's source columns
    aliases: Mapping[str, str] = field(default_factory=dict)  # the run's model aliases (local stand-ins)


@dataclass(frozen=True)
class Exported:
    """An export's code, and the files that travel with it (path -> text)."""

    code: str
    files: Mapping[str, str] = field(default_factory=dict)


class Exporter(Protocol):
    """A kind's export forms (besides 'sql', the program as stored, which every kind has) and its deploy check:
    why a program would not run where a form deploys it (`Finding`s, empty when it would)."""

    forms: frozenset[str]

    def export(self, request: ExportRequest) -> Exported:
        """`request.code` in `request.form`; a one-line CocoError when it cannot be."""
        ...

    def deploy_checked(self, form: str, dialect: str) -> bool:
        """Whether a program exported in `form` (written in `dialect`) is checked for its deployment."""
        ...

    def check_deploy(self, code: str, dialect: str, task: TaskPack | None, where: str) -> list[Any]:
        """The findings for `code` (`task`: its columns and functions, None when the pack is gone)."""
        ...


class Highlighter(Protocol):
    """A program in the report: its HTML (escaped, with spans per token class: `languages.highlighting`), and
    the form a diff between two programs compares, mapped back to the lines as written."""

    def html(self, code: str) -> str: ...

    def formatted(self, code: str, dialect: str) -> str:
        """The normal form diffs compare (`code` itself when there is none, or it does not parse)."""
        ...

    def written_lines(self, written: str, formatted: str, dialect: str) -> list[list[int]] | None:
        """For each line of `formatted`, the 0-based lines of `written` it comes from; None when unknown."""
        ...


class TaskKeys(Protocol):
    """The kind's own keys of task.toml's `[program]` table (Python: the entry function and the harness)."""

    program_keys: tuple[str, ...]

    def read(
        self, reader: Reader, root: Path, program: Mapping[str, Any]
    ) -> tuple[dict[str, Any], list[Path]]:
        """The TaskPack fields the keys give, and the files they name (fingerprinted with the pack)."""
        ...


class PackLoader(Protocol):
    """A kind whose task.toml has tables of its own (dbt: sources, targets, expected rows) loads the whole pack:
    the TaskPack of the pack at `root` (its parsed task.toml `doc`, read through `reader` for one-line errors,
    `fingerprint(files)` for the files it reads)."""

    def __call__(
        self, root: Path, reader: Reader, doc: Mapping[str, Any], fingerprint: Callable[..., str]
    ) -> TaskPack: ...


class TaskRegistrar(Protocol):
    """A kind whose tasks `coco_task` registers from the user's own tables (its option `kind`), with options of
    its own (dbt: several source tables, an expected table per target model). `check` refuses bad options
    before anything is read or written; `queries` are the user's queries `register` will read (the caller
    checks them as read-only before a store is opened); `register` reads them through the store, builds and
    checks the task, validates its seed and stores it as rows (`Warehouse.register_task`), returning the
    coco_task row (task, rows, train, val, test); `load` builds the task again from those rows."""

    def check(self, name: object, source: object, options: object) -> Mapping[str, Any]: ...

    def queries(self, checked: Mapping[str, Any]) -> list[str]: ...

    def register(self, name: str, checked: Mapping[str, Any], store: Warehouse) -> dict[str, Any]: ...

    def load(self, name: str, registered: RegisteredTask) -> TaskPack: ...


class TaskSpec(Protocol):
    """Another tool's specification of a task, read as this kind's coco_task options (SQL: Snowflake's
    AI_FUNCTION_OPTIMIZATION specification, options `spec` and `ai_function`: `options.AIFO_TASK_OPTIONS`).
    `options` gives the checked options with those the specification sets (a one-line TaskError on what it
    cannot take); `settings` the kind's task.toml table (`[<kind>]`) of a task registered with them over
    columns of these (DuckDB) types."""

    def options(self, name: str, given: Mapping[str, Any]) -> dict[str, Any]: ...

    def settings(self, options: Mapping[str, Any], types: Mapping[str, str]) -> dict[str, Any]: ...


class FolderExport(Protocol):
    """A kind's export forms that are a folder of files (dbt: a project `dbt build` runs): the export's text
    form written out as the folder (`coco-sql export --out DIR`)."""

    forms: frozenset[str]

    def write(self, text: str, folder: Path) -> list[str]:
        """The paths written into `folder` (new or empty); a one-line ConfigError, nothing written, else."""
        ...


class InEngineDrafts(Protocol):
    """Drafts tested inside the probe sandbox (the offline mutator's `probe_draft`): whether a bound language's
    programs run there, and the query that runs a checked program over the training rows (rows of id, output)."""

    def runs_here(self, language: Language) -> bool: ...

    def query(self, runnable: str, output_column: str) -> str: ...


class DraftView(Protocol):
    """How the coding agent's draft test (`show_draft`, `test_draft`) shows a kind's training rows: what beside
    the train score it answers, with at most `limit` rows in "rows" (`chosen`: exactly these rows, in order;
    None: the kind picks, failures first, so that a shorter list is a prefix). The rows are the training split's
    only; the answer must be JSON-ready."""

    def __call__(
        self,
        task: TaskPack,
        rows: Sequence[EvaluationRow],
        limit: int,
        chosen: Sequence[EvaluationRow] | None,
    ) -> dict[str, Any]: ...
