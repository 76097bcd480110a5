"""The shared draft -> test -> pick loop (`mutate.drafts`): what it tests, when it stops, what it picks.

The drafts here are programs scored by a table, so that each rule of the loop shows on its own; the kinds'
tests (test_python_language, test_loop, test_ai_edits, test_prompt_only, the dbt and agent_spec ones) run it
on real programs and engines.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from coco_sql.mutate.choice import NearBest
from coco_sql.mutate.drafts import DraftLoop, try_drafts

SCORES = {"a": 0.2, "b": 0.5, "c": 0.5, "d": 0.1, "bad": float("nan")}


def _loop(tested: list[str], skip: list[str] | None = None) -> DraftLoop[str, float]:
    def test(draft: str, code: str) -> float | None:
        if code == "rejected":
            return None
        tested.append(code)
        return SCORES[code]

    return DraftLoop(lambda draft: draft, test, lambda score: None if score != score else (score,), skip)


def test_the_first_best_wins_without_a_draw_and_a_rejected_or_failed_draft_is_not_picked() -> None:
    tested: list[str] = []
    loop = _loop(tested)
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    chosen = loop.run(["rejected", "bad", "a", "b", "c"]).pick(rng)
    assert chosen is not None and chosen.draft == "b"
    assert [t.code for t in loop.trials] == ["bad", "a", "b", "c"]  # rejected: not counted
    assert [t.code for t in loop.ranked()] == ["b", "c", "a"]  # failed: not rankable
    assert rng.bit_generator.state == state  # exact ties, first wins: nothing drawn


def test_the_near_best_draw_takes_either_tie_and_is_fixed_by_the_seed() -> None:
    picks = set()
    for seed in range(20):
        loop = _loop([]).run(["a", "b", "c"])
        picked = loop.pick(np.random.default_rng(seed), NearBest(relative=0.1, top=3))
        assert picked is not None
        again = (
            _loop([]).run(["a", "b", "c"]).pick(np.random.default_rng(seed), NearBest(relative=0.1, top=3))
        )
        assert again is not None and again.draft == picked.draft
        picks.add(picked.draft)
    assert picks == {"b", "c"}  # a (0.2) is not within 10% of 0.5


def test_later_keys_break_ties_of_the_first() -> None:
    measures = {"x": (1.0, 0.3), "y": (1.0, 0.9), "z": (0.5, 1.0)}
    loop: DraftLoop[str, tuple[float, float]] = DraftLoop(
        lambda draft: draft, lambda _, code: measures[code], lambda measured: measured
    )
    assert [t.draft for t in loop.run(["x", "y", "z"]).ranked()] == ["y", "x", "z"]


def test_skip_tests_no_program_twice_nor_the_skipped_ones() -> None:
    tested: list[str] = []
    loop = _loop(tested, skip=["a"])
    loop.run(["a", "b", "b", "c", "c"])
    assert tested == ["b", "c"]
    loop.run(["c", "d"])  # a later run remembers what the earlier one tested
    assert tested == ["b", "c", "d"]
    repeats: list[str] = []
    _loop(repeats).run(["b", "b"])  # without skip every draft is tested
    assert repeats == ["b", "b"]


def test_max_drafts_is_one_budget_over_all_runs_and_a_generator_stops_at_the_last_draft_tested() -> None:
    pulled: list[str] = []

    def drafts(names: str) -> Iterator[str]:
        for name in names:
            pulled.append(name)
            yield name

    loop = _loop([])
    loop.run(drafts("ab"), max_drafts=3)
    loop.run(drafts("cd"), max_drafts=3)
    assert [t.code for t in loop.trials] == ["a", "b", "c"]
    assert pulled == ["a", "b", "c"]  # "d" was never drawn
    loop.run(drafts("d"), max_drafts=3)
    assert pulled == ["a", "b", "c"]  # the budget is spent: nothing is drawn


def test_a_stage_reads_the_loop_between_drafts() -> None:
    """Stages as generators: the second runs only when the first found nothing above 0.4, with what is left."""

    def stages(loop: DraftLoop[str, float], first: list[str], second: list[str]) -> Iterator[str]:
        yield from first
        if any(t.result > 0.4 for t in loop.trials):
            return
        yield from second[: 3 - len(loop.trials)]

    loop = _loop([])
    loop.run(stages(loop, ["a"], ["d", "b", "c"]))
    assert [t.code for t in loop.trials] == ["a", "d", "b"]
    loop = _loop([])
    loop.run(stages(loop, ["b"], ["d"]))
    assert [t.code for t in loop.trials] == ["b"]


def test_enough_stops_once_min_tested_were_and_the_best_passes() -> None:
    loop = _loop([]).run(["a", "b", "c", "d"], enough=lambda best: best >= 0.5, min_tested=3)
    assert [t.code for t in loop.trials] == ["a", "b", "c"]


class _Env:
    """A draft environment of named programs: `check` rejects 'rejected'."""

    class Outcome:
        def __init__(self, score: float) -> None:
            self.ok, self.score = score == score, score

    def check(self, code: str) -> str | None:
        return "not a program" if code == "rejected" else None

    def test_draft(self, code: str) -> _Env.Outcome:
        return _Env.Outcome(SCORES[code])


@pytest.mark.parametrize(
    ("drafts", "best", "score", "tested"),
    [
        (["rejected", "a", "b", "c", "d"], "b", 0.5, ["a", "b", "c"]),
        (["bad", "rejected"], None, None, ["bad"]),
    ],
)
def test_try_drafts_checks_then_tests_at_most_max_drafts_and_picks_by_training_score(
    drafts: list[str], best: str | None, score: float | None, tested: list[str]
) -> None:
    found = try_drafts(_Env(), drafts, lambda d: d, max_drafts=3, rng=np.random.default_rng(0))
    assert (found.best, found.score, found.tested) == (best, score, tested)
