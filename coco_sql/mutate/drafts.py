"""The offline mutators' shared step: draft -> test -> pick.

A kind's offline mutator lists and orders its drafts (its own operators, its own RNG draws); this loop tests them
on the training rows the mutator may see (`DraftEnvironment`: `check` is the validator, `test_draft` a run on the
training split, answered from the evaluator's memo when it ran before) and picks the one to propose among the
near-best by training score (`choice.pick_near_best`; by default the first best in the mutator's order). A draft
the validator rejects is skipped and not counted; at most `max_drafts` are tested; `enough` stops the loop at
the first tested draft whose score is good enough (a kind whose test costs a run: dbt).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from coco_sql.mutate.choice import NearBest, pick_near_best

T = TypeVar("T")


class DraftTests(Protocol):
    """What the loop needs of a draft environment (`reflect.environment.DraftEnvironment`)."""

    def check(self, code: str) -> str | None: ...

    def test_draft(self, code: str) -> Any: ...


@dataclass(frozen=True)
class Tested(Generic[T]):
    """What the loop found: the picked draft and its training score (None when no tested draft ran), and every
    draft it tested, in order (whatever their outcome)."""

    best: T | None
    score: float | None
    tested: list[T] = field(default_factory=list)


def try_drafts(
    env: DraftTests,
    drafts: Iterable[T],
    code: Callable[[T], str],
    *,
    max_drafts: int,
    rng: np.random.Generator,
    near: NearBest | None = None,
    enough: Callable[[float], bool] | None = None,
    min_tested: int = 1,
) -> Tested[T]:
    """Test `drafts` in their order (module docstring) and pick one: `code(draft)` is the program a draft
    proposes. `near` says which drafts tie with the best (default: exact ties, the first one wins, no draw);
    `enough` stops the loop once the best score so far passes it and `min_tested` drafts were tested."""
    tested: list[T] = []
    ran: list[tuple[T, float]] = []
    for draft in drafts:
        if len(tested) == max_drafts:
            break
        text = code(draft)
        if env.check(text) is not None:
            continue
        outcome = env.test_draft(text)
        tested.append(draft)
        if outcome.ok:
            ran.append((draft, outcome.score))
            if enough is not None and len(tested) >= min_tested and enough(max(s for _, s in ran)):
                break
    if not ran:
        return Tested(None, None, tested)
    chosen = pick_near_best([score for _, score in ran], rng, near or NearBest())
    return Tested(ran[chosen][0], ran[chosen][1], tested)


__all__ = ["DraftTests", "Tested", "try_drafts"]
