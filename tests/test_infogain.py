"""InfoGain targeting (CoCoEvolve Section 2.3, Appendix C.3) against hand-computed numbers, and the curator."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.testing import assert_allclose

from coco_sql.evaluate import Evaluator
from coco_sql.reflect import DraftEnvironment
from coco_sql.reflect.context import ContextBundle, ProgramView, StrategyNote
from coco_sql.reflect.curator import Curator
from coco_sql.search.infogain import InfoGainTargets, TargetingContext, UniformTargets, text_kernel
from coco_sql.tasks import load_task

KAPPA = np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0]])


def context(
    scores: list[float], solved: list[bool], failed: dict[str, int] | None = None
) -> TargetingContext:
    return TargetingContext(("a", "b", "c"), np.array(scores), np.array(solved), failed or {})


def test_surrogate_uses_kappa_to_the_fourth_with_cap_and_floor() -> None:
    ig = InfoGainTargets(KAPPA)
    # kappa^4: a~b = 0.0625. a: (1*0 + 0.0625*1) / 1.0625 = 0.0588 -> observed failure, floored to 0.1.
    # b: (0.0625*0 + 1*1) / 1.0625 = 0.941176. c: untested, no tested neighbour -> 0, under the 0.7 cap.
    assert_allclose(ig.surrogate(np.array([0.0, 1.0, np.nan])), [0.1, 1 / 1.0625, 0.0], atol=1e-9)
    # c untested but identical to b (kappa = 1): the estimate 1.0 is capped at 0.7.
    twin = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    assert_allclose(InfoGainTargets(twin).surrogate(np.array([0.0, 1.0, np.nan]))[2], 0.7)


def test_decay_halves_per_unsuccessful_targeting_and_resets_on_any_solve() -> None:
    ig = InfoGainTargets(KAPPA)
    ctx = context([0.0, 1.0, np.nan], [False, True, False], {"a": 2, "b": 3})
    assert_allclose(ig.decay(ctx), [0.25, 1.0, 1.0])  # b is solved somewhere: its count does not matter


def test_gain_and_softmax_over_unsolved_rows() -> None:
    ig = InfoGainTargets(KAPPA)
    ctx = context([0.0, 1.0, np.nan], [False, True, False], {"a": 2})
    # transfer = row means of kappa: a 0.5, b 0.5, c 1/3
    # gain a = (1 - 0.1) * 0.25 * 0.5 = 0.1125; b = (1 - 0.941176) * 1 * 0.5; c = (1 - 0) * 1 * (1/3)
    assert_allclose(ig.gains(ctx), [0.1125, (1 - 1 / 1.0625) * 0.5, 1 / 3], atol=1e-9)
    # softmax(gain / 0.1) over a and c only (the parent solves b): p_a = 1 / (1 + e^(3.3333 - 1.125))
    p_a = 1 / (1 + np.exp(10 / 3 - 1.125))
    assert_allclose(ig.probabilities(ctx), [p_a, 0.0, 1 - p_a], atol=1e-9)
    draws = [ig.order(ctx, np.random.default_rng(seed))[0] for seed in range(4000)]
    assert abs(draws.count("a") / len(draws) - p_a) < 0.015
    assert all(set(ig.order(ctx, np.random.default_rng(s))) == {"a", "c"} for s in range(20))


def test_uniform_targets_are_the_parents_unsolved_rows() -> None:
    ctx = context([0.0, 1.0, 0.5], [False, True, False])
    assert sorted(UniformTargets().order(ctx, np.random.default_rng(0))) == ["a", "c"]


def test_text_kernel_is_a_similarity_in_unit_range() -> None:
    kappa = text_kernel(["474747", "474748", "123456"])
    assert_allclose(np.diag(kappa), 1.0)
    assert_allclose(kappa, kappa.T)
    assert kappa[0, 1] > 0.5 > kappa[0, 2]
    assert ((kappa >= 0) & (kappa <= 1)).all()


@dataclass
class History:
    """A small run history: three programs' training-row scores (the loop's _RunState plays this role)."""

    train_ids: tuple[str, ...]
    rows: dict[str, np.ndarray]
    codes: dict[str, str]
    failed_targets: dict[str, int] = field(default_factory=dict)

    def train_scores(self, program_id: str) -> np.ndarray:
        return self.rows[program_id]

    def elite_ids(self) -> list[str]:
        return list(self.rows)

    def view(self, program_id: str) -> ProgramView:
        return ProgramView(program_id, self.codes[program_id], float(self.rows[program_id].mean()))

    def recent_notes(self, n: int) -> tuple[StrategyNote, ...]:
        return tuple(StrategyNote(i, "hillclimb", "hillclimb", "neutral", 0.0) for i in range(n))

    def root_id(self, program_id: str) -> str:
        return program_id

    def tried_from(self, parent_id: str) -> frozenset[str]:
        return frozenset({"duplicate_guard: add `WHEN p1 = 4 THEN 0` to CASE #3"})


def test_curator_bundles_donors_ledger_and_the_target_observation() -> None:
    task = load_task("lockpicking6")
    ids = tuple(task.split("train").expected)
    seed = task.seed_program
    evaluator = Evaluator(task)
    parent_rows = np.array([r.score for r in evaluator.evaluate(seed, "train").rows])
    target = ids[int(np.argmin(parent_rows))]
    donor_rows = parent_rows.copy()
    donor_rows[ids.index(target)] = 1.0
    history = History(ids, {"1-0": parent_rows, "1-7": donor_rows}, {"1-0": seed, "1-7": "SELECT 1"})
    env = DraftEnvironment(evaluator)

    bundle = Curator(UniformTargets(), max_targets=60).bundle(history, "1-0", env, np.random.default_rng(0))
    assert set(bundle.targets) == {i for i, s in zip(ids, parent_rows, strict=True) if s < 0.9}
    assert bundle.donors == {target: history.view("1-7")}  # the only row some elite solves
    assert [e.program_id for e in bundle.elites] == ["1-7"]
    assert len(bundle.ledger) == 8 and bundle.stagnant(5)
    assert bundle.tried == history.tried_from("1-0")
    first = bundle.target_observation
    assert first is not None and first["instance_id"] == bundle.targets[0] and first["expected"] is not None

    local = Curator(UniformTargets(), history=False).bundle(history, "1-0", env, np.random.default_rng(0))
    assert local.history is False and not local.donors and not local.elites and not local.ledger
    assert local.targets and local.target_observation is not None
    assert not ContextBundle().stagnant(5)
    evaluator.close()
