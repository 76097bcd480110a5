"""The language seam: what a program language provides to the loop, the evaluator and the mutators.

A language turns a candidate's text into a checked `Program` (or rejects it with a one-line reason), places it
in a MAP-Elites cell, and runs it over one split's instances in a sandbox of its own; its offline edit operators
are a mutator registered for it (`engine.registry.OFFLINE_MUTATORS`). Everything else (scoring, the archive, the ledger, the store, the history tools) is shared, so a
second language costs exactly one implementation of `Language`.

Engines are not languages: DuckDB and Snowflake are dialects inside the SQL language (`languages.sql`) and
implementations of the store; a Python program runs the same on both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from coco_sql.aifuncs.functions import AiFunctions
    from coco_sql.llm.usage import Usage
    from coco_sql.sandbox.lockdown import QueryResult
    from coco_sql.tasks import Split, TaskPack


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
    engine runs (a warehouse translates them: `languages.sql_warehouse`). `run` raises EvaluationError."""

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


LanguageFactory = Callable[["TaskPack"], Language]


def language_for(task: TaskPack) -> Language:
    """The language a task's programs are written in (`language` in task.toml; default sql)."""
    from coco_sql.errors import TaskError
    from coco_sql.languages.kinds import LANGUAGES

    factory = LANGUAGES.get(task.language)
    if factory is None:
        raise TaskError(
            f"task {task.name!r}: unknown language {task.language!r} (known: {', '.join(LANGUAGES)})"
        )
    return factory(task)
