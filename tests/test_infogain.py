"""InfoGain targeting (CoCoEvolve Section 2.3, Appendix C.3) against hand-computed numbers, its top-k neighbour
kernel against a brute-force one, and the curator."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest
from numpy.testing import assert_allclose

from coco_sql.evaluate import Evaluator
from coco_sql.reflect import DraftEnvironment
from coco_sql.reflect.context import ContextBundle, ProgramView, StrategyNote
from coco_sql.reflect.curator import Curator
from coco_sql.search.infogain import InfoGainTargets, TargetingContext, UniformTargets
from coco_sql.search.neighbours import Neighbours, build_neighbours
from coco_sql.tasks import load_task

KAPPA = np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0]])


def neighbours_of(kappa: np.ndarray, k: int | None = None) -> Neighbours:
    """The top-k structure of a small dense kappa: itself first, then by decreasing kappa (ties: row order)."""
    k = len(kappa) - 1 if k is None else k
    order = np.array(
        [[i, *[j for j in np.argsort(-row, kind="stable") if j != i][:k]] for i, row in enumerate(kappa)]
    )
    weight = np.take_along_axis(kappa, order, axis=1).astype(np.float32)
    return Neighbours(order.astype(np.int32), weight, kappa.mean(axis=1))


def context(
    scores: list[float], solved: list[bool], failed: dict[str, int] | None = None
) -> TargetingContext:
    ids = tuple("abcdefgh"[: len(scores)])
    return TargetingContext(ids, np.array(scores), np.array(solved), failed or {})


def test_surrogate_uses_kappa_to_the_fourth_with_cap_and_floor() -> None:
    ig = InfoGainTargets(neighbours_of(KAPPA))
    # kappa^4: a~b = 0.0625. a: (1*0 + 0.0625*1) / 1.0625 = 0.0588 -> observed failure, floored to 0.1.
    # b: (0.0625*0 + 1*1) / 1.0625 = 0.941176. c: untested, no tested neighbour -> 0, under the 0.7 cap.
    assert_allclose(ig.surrogate(np.array([0.0, 1.0, np.nan])), [0.1, 1 / 1.0625, 0.0], atol=1e-9)
    # c untested but identical to b (kappa = 1): the estimate 1.0 is capped at 0.7.
    twin = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    assert_allclose(InfoGainTargets(neighbours_of(twin)).surrogate(np.array([0.0, 1.0, np.nan]))[2], 0.7)
    assert_allclose(ig.surrogate(np.full(3, np.nan)), 0.7)  # nothing tested: every row at the cap


def test_surrogate_only_sees_the_k_nearest_rows_and_transfer_sees_all() -> None:
    # a's nearest row is b (0.9), then c (0.5): with k = 1, c is outside N(a)
    kappa = np.array([[1.0, 0.9, 0.5, 0.0], [0.9, 1.0, 0.4, 0.0], [0.5, 0.4, 1.0, 0.2], [0.0, 0.0, 0.2, 1.0]])
    ig = InfoGainTargets(neighbours_of(kappa, k=1))
    assert ig.neighbours.index.tolist() == [[0, 1], [1, 0], [2, 0], [3, 2]]
    scores = np.array([np.nan, 0.5, 0.0, np.nan])
    # a untested: N(a) = {a, b} and only b (0.5) is tested, so s^ = 0.5; c (0.0) is outside N(a).
    # b tested: N(b) = {b, a}, a untested, so s^ = b's own 0.5. c a tested failure: N(c) = {c, a}, s^ = 0,
    # floored to 0.1. d untested: N(d) = {d, c}, c tested at 0: s^ = 0.
    assert_allclose(ig.surrogate(scores), [0.5, 0.5, 0.1, 0.0])
    # transfer = mean of kappa over the whole pool, not over N(t)
    assert_allclose(ig.transfer, kappa.mean(axis=1))
    dense = InfoGainTargets(neighbours_of(kappa))  # k = N - 1: the dense formulas of the paper
    a = (0.9**4 * 0.5 + 0.5**4 * 0.0) / (0.9**4 + 0.5**4)  # a untested: b and c, weighted by kappa^4
    assert_allclose(dense.surrogate(scores)[0], a)


def test_decay_halves_per_unsuccessful_targeting_and_resets_on_any_solve() -> None:
    ig = InfoGainTargets(neighbours_of(KAPPA))
    ctx = context([0.0, 1.0, np.nan], [False, True, False], {"a": 2, "b": 3})
    assert_allclose(ig.decay(ctx), [0.25, 1.0, 1.0])  # b is solved somewhere: its count does not matter


def test_gain_and_softmax_over_unsolved_rows() -> None:
    ig = InfoGainTargets(neighbours_of(KAPPA))
    ctx = context([0.0, 1.0, np.nan], [False, True, False], {"a": 2})
    # transfer = row means of kappa (N(t) is the whole pool here): a 0.5, b 0.5, c 1/3
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


def dense_from(nb: Neighbours) -> np.ndarray:
    """The kappa matrix a Neighbours structure holds: its filled slots, 1 on the diagonal, 0 elsewhere."""
    kappa = np.eye(len(nb))
    rows, slots = np.nonzero(nb.weight[:, 1:] > 0)
    kappa[rows, nb.index[rows, slots + 1]] = nb.weight[rows, slots + 1]
    return kappa


def test_text_similarity_is_a_cosine_in_unit_range() -> None:
    nb = build_neighbours(["474747", "474748", "123456"])
    assert nb.k == 2 and nb.index[:, 0].tolist() == [0, 1, 2] and (nb.weight[:, 0] == 1.0).all()
    kappa = dense_from(nb)
    assert_allclose(kappa, kappa.T)
    assert kappa[0, 1] > 0.5 > kappa[0, 2]
    assert ((nb.weight >= 0) & (nb.weight <= 1)).all()


def texts_for_tests(count: int, seed: int = 3) -> list[str]:
    """Lockpicking codes, near-copies of them, repeats, and short sentences: ties, zeros and real neighbours."""
    rng = np.random.default_rng(seed)
    words = ["lock", "pick", "pin", "tumbler", "key", "door", "open", "the", "a", "with"]
    texts = []
    for i in range(count):
        kind = i % 4
        if kind == 0:
            texts.append("".join(str(d) for d in rng.integers(0, 10, 6)))
        elif kind == 1 and texts:
            base = texts[int(rng.integers(len(texts)))]
            texts.append(base[:-1] + str(int(rng.integers(10))))
        elif kind == 2 and texts:
            texts.append(texts[int(rng.integers(len(texts)))])
        else:
            texts.append(" ".join(words[int(w)] for w in rng.integers(0, len(words), rng.integers(2, 7))))
    return texts


def brute_force_kappa(texts: list[str]) -> np.ndarray:
    """kappa by definition, in plain Python: the cosine of padded character 3-gram counts."""
    grams = [Counter(f" {t} "[i : i + 3] for i in range(max(1, len(t)))) for t in texts]
    norms = [math.sqrt(sum(c * c for c in g.values())) for g in grams]
    kappa = np.eye(len(texts))
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            dot = sum(c * grams[j].get(g, 0) for g, c in grams[i].items())
            kappa[i, j] = kappa[j, i] = dot / (norms[i] * norms[j])
    return kappa


# the LSH forest with 8 trees and a window of 4 meets at most 64 of the 199 other rows: not all pairs
@pytest.mark.parametrize(
    "settings",
    [{"exact_below": 10_000}, {"exact_below": 0, "trees": 8, "window": 4}],
    ids=["all-pairs", "lsh"],
)
def test_neighbours_are_the_top_k_of_a_brute_force_kernel(settings: dict[str, int]) -> None:
    texts = texts_for_tests(200)
    kappa = brute_force_kappa(texts)
    k = 8
    nb = build_neighbours(texts, k, **settings)
    assert nb.index.shape == nb.weight.shape == (200, k + 1)
    assert nb.index.dtype == np.int32 and nb.weight.dtype == np.float32
    rows = np.arange(200)
    assert (nb.index[:, 0] == rows).all() and (nb.weight[:, 0] == 1.0).all()
    assert (np.diff(nb.weight[:, 1:], axis=1) <= 0).all()  # by decreasing kappa
    assert_allclose(nb.mean_kappa, kappa.mean(axis=1), atol=1e-6)  # exact at any size: X[t] · mean X
    # every weight is the true kappa of its pair (weight-0 slots hold the row itself)
    filled = nb.weight[:, 1:] > 0
    assert_allclose(nb.weight[:, 1:][filled], kappa[rows[:, None], nb.index[:, 1:]][filled], atol=1e-5)
    assert (nb.index[:, 1:][~filled] == np.broadcast_to(rows[:, None], (200, k))[~filled]).all()
    for i in range(200):  # no row twice, never itself among the neighbours
        found = nb.index[i, 1:][filled[i]]
        assert len(set(found.tolist())) == len(found) and i not in found
    off = kappa - 2 * np.eye(200)
    true_top = -np.sort(-off, axis=1)[:, :k]  # the k largest kappa of each row, itself excluded
    if settings["exact_below"]:
        assert_allclose(nb.weight[:, 1:], np.maximum(true_top, 0), atol=1e-5)  # exact, ties included
    else:
        # approximate: most of the true top-k similarity mass, and the nearest row almost always found
        assert nb.weight[:, 1:].sum() >= 0.95 * true_top.sum()
        assert np.mean(np.abs(nb.weight[:, 1] - true_top[:, 0]) < 1e-5) >= 0.95
    # symmetric where both directions are kept: kappa(i, j) is the same number seen from i and from j
    pairs = {
        (i, int(j)): w for i in range(200) for j, w in zip(nb.index[i, 1:], nb.weight[i, 1:], strict=True)
    }
    assert all(pairs[(j, i)] == w for (i, j), w in pairs.items() if (j, i) in pairs and w > 0)
    # deterministic: the same texts give the same structure
    again = build_neighbours(texts, k, **settings)
    assert (again.index == nb.index).all() and (again.weight == nb.weight).all()


def test_a_pool_of_at_most_k_rows_is_the_dense_kernel() -> None:
    nb = build_neighbours(["474747", "474748", "123456"], k=32)
    assert nb.k == 2
    kappa = brute_force_kappa(["474747", "474748", "123456"])
    assert_allclose(dense_from(nb), kappa, atol=1e-6)
    assert_allclose(nb.mean_kappa, kappa.mean(axis=1), atol=1e-6)
    assert build_neighbours([]).index.shape == (0, 1) and build_neighbours(["x"]).index.tolist() == [[0]]


def test_infogain_targets_failing_rows_near_solved_ones_and_never_solved_rows() -> None:
    """A cluster of similar codes the parent half solves, and isolated strings it fails: as with the dense kernel,
    the cluster's failures are the targets (their fix transfers), and the rows it solves never are."""
    rng = np.random.default_rng(5)
    cluster = [f"1234{d:02d}" for d in rng.choice(100, 20, replace=False)]
    isolated = ["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), 8)) for _ in range(10)]
    texts = cluster + isolated
    ids = tuple(f"r{i}" for i in range(30))
    # the cluster: 10 rows solved, 10 failing; the isolated strings: all failing
    scores = np.array([1.0] * 10 + [0.0] * 10 + [0.0] * 10)
    ctx = TargetingContext(ids, scores, scores >= 0.9, {})
    sparse = InfoGainTargets.from_texts(texts, k=8)
    dense = InfoGainTargets(neighbours_of(brute_force_kappa(texts)))  # the formulas over the whole pool
    for ig in (sparse, dense):
        p = ig.probabilities(ctx)
        assert (p[:10] == 0).all() and p.sum() == pytest.approx(1.0)  # rows the parent solves: never targets
        assert p[10:20].sum() > 0.75  # the cluster's failures, next to its solved rows
        assert set(np.argsort(-p, kind="stable")[:5]) <= set(range(10, 20))
        order = ig.order(ctx, np.random.default_rng(7))
        assert sorted(order) == sorted(ids[10:]) and order == ig.order(ctx, np.random.default_rng(7))
    # k = 8 of 29 other rows changes the numbers a little, not the picture; k = 29 is the dense kernel exactly
    tv = 0.5 * np.abs(sparse.probabilities(ctx) - dense.probabilities(ctx)).sum()
    assert tv < 0.15
    whole = InfoGainTargets.from_texts(texts, k=29)
    assert_allclose(whole.probabilities(ctx), dense.probabilities(ctx), atol=1e-6)


def test_neighbours_of_20000_rows_build_under_a_2_gib_address_space_cap() -> None:
    """No N×N matrix and no dense BLAS product: a 20,000-row pool builds in a child capped at 2 GiB."""
    script = textwrap.dedent(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        import numpy as np
        from coco_sql.search.neighbours import build_neighbours

        rng = np.random.default_rng(12)
        codes = [''.join(map(str, row)) for row in rng.integers(0, 10, size=(20_000, 6))]
        nb = build_neighbours(codes)
        assert nb.index.shape == (20_000, 33) and (nb.weight[:, 1] > 0).all()
        print('ok')
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # SIGSEGV would be -11
    assert done.stdout.strip() == "ok"


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


@pytest.mark.parametrize("peak", [1, 8, 40])
def test_the_first_targets_are_those_of_the_whole_order_and_the_rng_ends_in_step(peak: int) -> None:
    """`order(limit=m)` computes only numpy's first round of draws, yet gives the first m rows of the whole
    order; with a peaked distribution (few distinct rows in that round) it falls back to the full draw."""
    draw = np.random.default_rng(peak)
    rows = 3000
    texts = ["".join(draw.choice(list("0123456789"), 6)) for _ in range(rows)]
    ids = tuple(f"r{i}" for i in range(rows))
    scores = np.where(draw.random(rows) < 0.3, 1.0, draw.random(rows) ** peak)
    ctx = TargetingContext(ids, scores, scores >= 0.9, {})
    picker = InfoGainTargets(InfoGainTargets.from_texts(texts, k=8).neighbours, temperature=0.5 / peak)
    for seed in range(5):
        whole, head = np.random.default_rng(seed), np.random.default_rng(seed)
        assert picker.order(ctx, head, 5) == picker.order(ctx, whole)[:5]
    uniform = UniformTargets()
    assert uniform.order(ctx, np.random.default_rng(1), 5) == uniform.order(ctx, np.random.default_rng(1))[:5]


def test_a_peaked_distribution_falls_back_to_the_full_draw_with_the_rng_untouched() -> None:
    from coco_sql.search.infogain import _leading_draws

    p = np.full(1000, 1e-9)
    p[[3, 500, 900]] = 1.0
    p /= p.sum()
    rng = np.random.default_rng(0)
    assert _leading_draws(p, 1000, 5, rng) is None  # the first round finds only the 3 heavy rows
    assert rng.random() == np.random.default_rng(0).random()
    head = _leading_draws(p, 1000, 2, np.random.default_rng(0))
    whole = np.random.default_rng(0).choice(1000, size=1000, replace=False, p=p)
    assert head is not None and list(head) == list(whole[:2])
