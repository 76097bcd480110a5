"""The kind seam: what a program kind (a language) provides to the loop, the evaluator, the mutators, PACE, the
exports and the report. This module holds protocols and dataclasses; it imports no kind.

A language turns a candidate's text into a checked `Program` (or rejects it with a one-line reason), places it
in a MAP-Elites cell, and runs it over one split's instances in a sandbox of its own. A kind ships as a
`KindPlugin`: `bind` makes its `Language` for one task, and the optional parts (its offline operators, what a
primitive is for PACE, honest train scores, export forms, highlighting, task.toml keys, reference tables) are
small protocols, None where the kind has none: callers ask `plugin.cross_fit is not None`, never `getattr`.
Kinds are found by name through `coco_sql.plugins` (built-ins, and entry points of group `coco_sql.languages`).
Everything else (scoring, the archive, the ledger, the store, the history tools) is shared.

Engines are not languages: DuckDB and Snowflake are dialects inside the SQL language (`languages.sql`) and
implementations of the store; a Python program runs the same on both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from coco_sql.aifuncs.functions import AiFunctions
    from coco_sql.evaluate import Outcome
    from coco_sql.llm.usage import Usage
    from coco_sql.mutate.base import MutationRequest, Mutator, Proposal
    from coco_sql.primitives.library import Primitive, PrimitiveLibrary
    from coco_sql.reflect.environment import DraftEnvironment
    from coco_sql.sandbox.lockdown import QueryResult
    from coco_sql.store.base import CandidateEngine, Warehouse
    from coco_sql.store.records import EvaluationRow
    from coco_sql.store.registered import RegisteredTask
    from coco_sql.tasks import Split, TaskPack
    from coco_sql.tasks.pack_files import Reader


@dataclass(frozen=True)
class Program:
    """A candidate that passed its language's validator.

    `runnable` is what the sandbox executes (SQL: the DuckDB query; Python: the module source), `tree` the
    language's AST (a sqlglot expression, an `ast.Module`), used for features and by AST operators.
    """

    language: str
    source: str
    runnable: str
    tree: Any = field(compare=False, repr=False)


@dataclass(frozen=True)
class ProgramParts:
    """A program made of several files, as the report shows it (a kind plug-in's `parts`):
    its files (path -> content) and the graph between its parts, nodes as (name, kind, path or None) and edges as
    (from, to) names. The report diffs the files between two programs and draws the graph; it knows no kind."""

    files: Mapping[str, str]
    nodes: tuple[tuple[str, str, str | None], ...] = ()
    edges: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RunResult:
    """What one program produced over one split: `(instance id, output)` pairs, the wall time, and a one-line
    reason for each instance that produced nothing (the row's error; default "no output row for this id")."""

    outputs: list[tuple[object, object]]
    elapsed_ms: float
    errors: Mapping[str, str] = field(default_factory=dict)
    usage: Usage | None = (
        None  # what a warehouse billed for the run's AI calls; None where coco-sql's runtime
    )
    # answered them (it accounts them itself)
    # what the program did on each instance, by id, for a kind whose runs leave a trace (a data agent's messages,
    # tool calls and results): stored with the row's observation, read back by the history tools
    observations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


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

    def runner(self, split: Split, ai: AiFunctions | None) -> Runner:
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


class OfflineMutatorFactory(Protocol):
    """The kind's offline (no model) operators, built from the offline mutator's settings
    (`options.OFFLINE_SETTINGS`; none given: their defaults). A setting the kind has no use for, set to anything
    but its default, is a one-line ConfigError."""

    def __call__(self, **settings: Any) -> Mutator: ...


class PrimitiveAdapter(Protocol):
    """What a primitive is in one kind, for PACE (`primitives`, `mutate.pace`): how calls and definitions are
    read on a program, how a primitive is found (E2), made (E3), admitted, moved between programs (P1, P2, P4)
    and kept through the inner mutator's edit (P3). Every method takes the task's `dialect`; a kind with one
    dialect ignores it. A program that does not parse raises CandidateRejected where the method says so."""

    #: where a child carries the definitions it calls (PACE's operator prompt)
    where_definitions: str

    def call_set(self, code: str, names: frozenset[str], *, dialect: str) -> frozenset[str]:
        """C(A) restricted to `names`. Raises CandidateRejected."""
        ...

    def definitions(self, code: str, *, dialect: str) -> dict[str, str]:
        """name -> normalised definition text of every primitive definition `code` carries."""
        ...

    def library_definition(self, primitive: Primitive, *, dialect: str) -> str:
        """A library primitive's definition, normalised as `definitions` normalises a program's copy."""
        ...

    def extract(
        self,
        code: str,
        library: PrimitiveLibrary,
        *,
        origin_program: str | None,
        iteration: int,
        dialect: str,
        entry: str | None,
        rng: np.random.Generator | None,
        prefer: str | None,
        top: int,
    ) -> Primitive | None:
        """E2: one primitive refactored out of `code`, which is left as it is; None when nothing qualifies."""
        ...

    def combine(
        self,
        a: Primitive,
        b: Primitive,
        library: PrimitiveLibrary,
        rng: np.random.Generator,
        *,
        iteration: int,
        dialect: str,
    ) -> Primitive | None:
        """E3 without a model: a new primitive made of two; None when they do not combine."""
        ...

    def adopt(
        self,
        code: str,
        library: PrimitiveLibrary,
        *,
        how: str,
        iteration: int,
        origin_program: str | None,
        inputs: Sequence[str] | None,
        dialect: str,
    ) -> Primitive:
        """The library's primitive for one definition written elsewhere. Raises CandidateRejected."""
        ...

    def with_definitions(self, code: str, primitives: Sequence[Primitive], *, dialect: str) -> str:
        """`code` carrying the definitions of `primitives` it does not define yet (by name)."""
        ...

    def remove_definitions(self, code: str, names: set[str], *, dialect: str) -> str:
        """`code` without the definitions of `names`."""
        ...

    def replace_calls(
        self, code: str, target: Primitive, replacement: Primitive, *, dialect: str
    ) -> str | None:
        """Every call of `target` renamed to `replacement` (same arguments); None when there is none."""
        ...

    def swap_calls(self, code: str, target: Primitive, replacement: Primitive, *, dialect: str) -> str | None:
        """Every call of `target` made a call of `replacement` on its own parameters; None when `code` does not
        parse or does not call `target`."""
        ...

    def insertions(
        self, code: str, focus: Primitive, library: PrimitiveLibrary, *, dialect: str
    ) -> list[tuple[str, str]]:
        """(description, program) drafts that call `focus` (P1, P4), best guesses first."""
        ...

    def refine(
        self,
        inner: Mutator,
        request: MutationRequest,
        library: PrimitiveLibrary,
        rng: np.random.Generator,
        *,
        dialect: str,
    ) -> Proposal:
        """P3: the inner mutator's child of `request.parent`, its primitives kept as calls."""
        ...


class CrossFit(Protocol):
    """Honest train scores: `outcome` (a program's own, on every training row) with the rows the program holds
    as examples predicted out of fold; `outcome` itself when there is nothing to cross-fit."""

    def __call__(self, env: DraftEnvironment, code: str, outcome: Outcome) -> Outcome: ...


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


@dataclass(frozen=True)
class KindPlugin:
    """One program kind, as an entry point of group `coco_sql.languages` resolves to (`coco_sql.plugins`).

    `name` is task.toml's `language`; `program_prompt` says what a program is, for the coding agent's prompt.
    Every optional part is None when the kind lacks it, and its callers then do without it."""

    name: str
    bind: Bind
    program_prompt: Callable[[TaskPack], str]
    offline_mutator: OfflineMutatorFactory | None = None
    primitives: PrimitiveAdapter | None = None
    cross_fit: CrossFit | None = None
    exports: Exporter | None = None
    highlight: Highlighter | None = None
    task_keys: TaskKeys | None = None
    references: Callable[[TaskPack], bool] | None = None  # whether a task gets reference tables (`examples`)
    in_engine_drafts: InEngineDrafts | None = None
    pack_loader: PackLoader | None = None
    registrar: TaskRegistrar | None = None  # coco_task of this kind over the user's tables
    folder_export: FolderExport | None = None
    parts: Callable[[str], ProgramParts | None] | None = None  # a program of several files, for the report
    # a champion larger than this gets a warning after a run (SQL, issue 15: inline few-shot examples make a
    # program hard to review and costly per row; they belong in a small subset or a table); None: no warning
    warn_bytes: int | None = None
    dialects: bool = False  # programs are written in the task's dialect (task.toml `dialect`)
    # each run leaves a trace per row (`RunResult.observations`): the coding agent is offered `get_row_trace`
    row_traces: bool = False
    # a program of several files in one text, each under a line `{file_marker}PATH`: the coding agent's
    # edit_candidate may scope a search to one file by starting it with that line (`agent.workspace`)
    file_marker: str | None = None
    draft_view: DraftView | None = (
        None  # the kind's own answer to a draft test; None: output against expected
    )


def language_for(task: TaskPack, engine: CandidateEngine | None = None) -> Language:
    """The language a task's programs are written in (`language` in task.toml; default sql), bound to `engine`
    when the store runs candidates itself."""
    from coco_sql.plugins import kind

    return kind(task.language, task=task.name).bind(task, engine)
