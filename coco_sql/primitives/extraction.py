"""EAP discovery without a model: extraction from a program and generation by combining two primitives.

PACE, "EAP Discovery": at most one new primitive per generation; extraction from a new history-best program
takes priority over generation, and the two never happen in the same generation (the loop's rule, not this
module's).

- Extraction (E2, offline): "refactors local logic from a newly evaluated historical best into a persistent EAP,
  strictly without altering or reevaluating the source program". `extract` returns a `Primitive` and leaves the
  program as it is.
  SQL: a guard (a CASE WHEN / IFF condition, or a WHERE / QUALIFY conjunct) becomes a scalar macro whose
  parameters are the columns it reads (sorted, unqualified). Python: a self-contained top-level helper the
  entry function calls becomes a primitive (renamed `p_<helper>`); only when there is none, a self-contained
  sub-expression of the entry function does (`def p_x(<the entry parameters it uses>): return <expr>`).
  Candidates are ranked largest first (AST nodes; ties: written order); `rng` picks uniformly among the `top`
  (default 3) largest, so the biggest guard does not always win; without an RNG the largest is taken; `prefer`
  (a candidate's text, from `sql_guards` / `python_candidates`) overrides the choice. Candidates whose
  definition, up to names, is already in the library are skipped.
- Generation (E3, offline stand-in): `combine` joins two primitives into one that differs from both (two SQL
  boolean macros by AND or OR; two numeric Python functions by a weighted sum). An LLM mutator generates
  richer ones from the E3 prompt.
- Each kind's half is its own (`languages.sql.pace_extract`, `languages.python.pace_extract`); the shared parts
  are here: the candidate, the choice among the largest, the dispatch to the kind's adapter. The edits operators
  use (`with_definitions`, `prune_definitions`, `replace_calls`) are in `primitives.edits`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.primitives.calls import adapter
from coco_sql.primitives.library import Primitive, PrimitiveLibrary

TOP_CANDIDATES = 3


@dataclass(frozen=True)
class Candidate:
    """A piece of a program that could become a primitive: its text, size, parameters and definition."""

    text: str  # the guard or expression as written in the program (normal form)
    nodes: int
    params: tuple[str, ...]
    body: str  # SQL: the macro body over the params; Python: the def's source
    hint: str  # what the new primitive's name is made from
    imports: tuple[str, ...] = ()
    kind: str = "guard"  # guard (SQL) | helper | expression (Python)


def choose(
    candidates: list[Candidate], rng: np.random.Generator | None, prefer: str | None, top: int
) -> Candidate | None:
    if not candidates:
        return None
    if prefer is not None:
        return next((c for c in candidates if c.text == prefer), None)
    pool = candidates[: max(1, top)]
    return pool[int(rng.integers(len(pool)))] if rng is not None else pool[0]


def extract(
    code: str,
    language: str,
    library: PrimitiveLibrary,
    *,
    origin_program: str | None,
    iteration: int,
    dialect: str = SANDBOX_DIALECT,
    entry: str | None = None,
    rng: np.random.Generator | None = None,
    prefer: str | None = None,
    top: int = TOP_CANDIDATES,
) -> Primitive | None:
    """One primitive refactored out of `code` (E2, offline), or None when nothing qualifies or every candidate
    is already in the library. The program itself is not touched. Python needs the task's `entry` function."""
    return adapter(language).extract(
        code, library, origin_program=origin_program, iteration=iteration, dialect=dialect, entry=entry, rng=rng,
        prefer=prefer, top=top,
    )  # fmt: skip


def combine(
    a: Primitive,
    b: Primitive,
    library: PrimitiveLibrary,
    rng: np.random.Generator,
    *,
    iteration: int,
    dialect: str = SANDBOX_DIALECT,
) -> Primitive | None:
    """A new primitive made of two of the library's (E3 without a model: "a self-contained function whose
    capability differs from the current EAPs"), or None when they do not combine or the result is already in
    the library. SQL: two boolean macros joined by AND or OR (the RNG picks), over both parameter lists.
    Python: two functions returning numbers, as nested copies mixed by a weighted sum w*a + (1-w)*b with
    w drawn from `rng` (nested, because a primitive must not call another primitive)."""
    if a.language != b.language or a.name == b.name:
        return None
    return adapter(a.language).combine(a, b, library, rng, iteration=iteration, dialect=dialect)


def short_name(primitive: Primitive) -> str:
    return primitive.name.removeprefix("p_")[:10]
