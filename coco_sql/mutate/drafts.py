"""The offline mutators' shared step: draft -> test -> pick.

A kind's offline mutator lists and orders its drafts (its own operators, its own RNG draws); `DraftLoop` tests
them in that order on the training rows the mutator may see and picks the one to propose. The mutator says what a
draft's program is (`code`), how a draft is measured (`test`: None rejects it untested, and it is not counted)
and how measures rank for the pick (`key`: best first; None leaves a draft out of the pick, e.g. a failed run).
The pick is a draw among the near-best of that ranking (`choice.pick_near_best`; by default the first best).

A mutator whose search has stages runs them through one loop: a generator of drafts can read the loop's trials
between drafts (how many were tested, whether one gains), so stages share one budget and a later stage runs only
when the earlier ones found nothing. The loop draws nothing from the RNG but the pick's own draw.

`try_drafts` is the loop as the python, agent_spec and dbt kinds use it: the validator rejects a draft untested,
a run on the training split measures it (`DraftEnvironment.test_draft`, answered from the evaluator's memo when it
ran before), and the training score ranks it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from coco_sql.mutate.choice import NearBest, pick_near_best

T = TypeVar("T")  # a draft, as the mutator lists it
R = TypeVar("R")  # what testing a draft measured

# A tested draft's rank for the pick, higher first: the near-best draw compares its first value, the rest
# break ties.
Key = tuple[float, ...]


class DraftTests(Protocol):
    """What `try_drafts` needs of a draft environment (`reflect.environment.DraftEnvironment`)."""

    def check(self, code: str) -> str | None: ...

    def test_draft(self, code: str) -> Any: ...


@dataclass(frozen=True)
class Trial(Generic[T, R]):
    """One tested draft: the draft, its program and what its test measured."""

    draft: T
    code: str
    result: R


class DraftLoop(Generic[T, R]):
    """Tests drafts in the mutator's order and picks one (module docstring).

    `code(draft)` is the program a draft proposes; `test(draft, code)` measures it, or returns None to reject it
    untested (not counted); `key(result)` ranks a tested draft for the pick, higher first, or is None to leave it
    out. `skip`: None tests every draft in turn, a repeated program too; otherwise the programs not to test (the
    parent's, say), to which each tested program is added, so that no program is tested twice (a draft that
    repeats one is skipped, not counted)."""

    def __init__(
        self,
        code: Callable[[T], str],
        test: Callable[[T, str], R | None],
        key: Callable[[R], Key | None],
        skip: Iterable[str] | None = None,
    ) -> None:
        self._code, self._test, self._key = code, test, key
        self._skip = None if skip is None else set(skip)
        self.trials: list[Trial[T, R]] = []  # every tested draft, in test order, whatever its result
        self._firsts: list[
            float
        ] = []  # the first key value of each tested draft the pick may take, in test order

    def run(
        self,
        drafts: Iterable[T],
        *,
        max_drafts: int | None = None,
        enough: Callable[[float], bool] | None = None,
        min_tested: int = 1,
    ) -> DraftLoop[T, R]:
        """Test `drafts` in their order until they run out, `max_drafts` drafts were tested in this loop (over
        all its runs), or, with `enough`, `min_tested` were and the best first key value so far passes it (a kind
        whose test costs a run: dbt). A generator of drafts is not advanced past the last draft tested."""
        if max_drafts is not None and len(self.trials) >= max_drafts:
            return self
        for draft in drafts:
            text = self._code(draft)
            if self._skip is not None and text in self._skip:
                continue
            result = self._test(draft, text)
            if result is None:
                continue
            self.trials.append(Trial(draft, text, result))
            if self._skip is not None:
                self._skip.add(text)
            if max_drafts is not None and len(self.trials) >= max_drafts:
                break
            key = self._key(result)
            if key is None:
                continue
            self._firsts.append(key[0])
            if enough is not None and len(self.trials) >= min_tested and enough(max(self._firsts)):
                break
        return self

    def ranked(self) -> list[Trial[T, R]]:
        """The tested drafts the pick may take (key not None), best first by key; equal keys in test order."""
        return [trial for _, trial in self._ranking()]

    def pick(self, rng: np.random.Generator, near: NearBest | None = None) -> Trial[T, R] | None:
        """A draw from `rng` among the near-best of `ranked` by the first key value (`near`, default: exact ties,
        the first one wins, no draw; no draw either when no draft gains); None when no tested draft may be
        picked."""
        ranking = self._ranking()
        if not ranking:
            return None
        return ranking[pick_near_best([key[0] for key, _ in ranking], rng, near or NearBest())][1]

    def _ranking(self) -> list[tuple[Key, Trial[T, R]]]:
        keyed = [(key, trial) for trial in self.trials if (key := self._key(trial.result)) is not None]
        return sorted(keyed, key=lambda pair: tuple(-v for v in pair[0]))


@dataclass(frozen=True)
class Tested(Generic[T]):
    """What `try_drafts` found: the picked draft and its training score (None when no tested draft ran), and every
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
    """Test at most `max_drafts` of `drafts` and pick one by training score (module docstring): the validator
    rejects a draft untested; a draft whose run fails is tested but not picked. `near`, `enough` and `min_tested`
    as in `DraftLoop.run` and `DraftLoop.pick`."""

    def test(_: T, text: str) -> Any:
        return None if env.check(text) is not None else env.test_draft(text)

    loop: DraftLoop[T, Any] = DraftLoop(code, test, lambda outcome: (outcome.score,) if outcome.ok else None)
    chosen = loop.run(drafts, max_drafts=max_drafts, enough=enough, min_tested=min_tested).pick(rng, near)
    tested = [trial.draft for trial in loop.trials]
    return Tested(None, None, tested) if chosen is None else Tested(chosen.draft, chosen.result.score, tested)


__all__ = ["DraftLoop", "DraftTests", "Key", "Tested", "Trial", "try_drafts"]
