"""A checked program, its parts as the report shows them, and what running it over one split produced."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coco_sql.llm.usage import Usage


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
