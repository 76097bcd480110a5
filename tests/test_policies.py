"""Parent policies against hand-computed examples (CoCoEvolve Appendix C.4, C.5, C.5.1, D.1).

Running example (4 programs x 6 rows), programs in iteration order A=0, B=1, C=2, D=3:

         r0    r1    r2    r3    r4    r5     sum   solved at theta = 0.9
    A   1.0   1.0   0.9   0.8   0.0   0.0    3.70   {0, 1, 2}
    B   1.0   0.5   1.0   0.0   0.0   0.2    2.70   {0, 2}
    C   0.0   0.0   0.0   0.0   0.95  0.0    0.95   {4}          (specialist)
    D   0.0   0.0   0.5   1.0   0.0   0.9    2.40   {3, 5}
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from coco_sql.engine.parents import draw_parent, nothing_left, redraw
from coco_sql.search import (
    DEFAULT_POLICY,
    POLICIES,
    BestPolicy,
    Elite,
    IslandArchive,
    LpRosterPolicy,
    MapElitesPolicy,
    ParetoPolicy,
    Population,
    RareCapabilityPolicy,
    build_roster,
    delta_jp,
    jp_score,
    lp_score,
    pareto_frontier,
    rare_terms,
)

A, B, C, D = 0, 1, 2, 3
SCORES = np.array(
    [
        [1.0, 1.0, 0.9, 0.8, 0.0, 0.0],
        [1.0, 0.5, 1.0, 0.0, 0.0, 0.2],
        [0.0, 0.0, 0.0, 0.0, 0.95, 0.0],
        [0.0, 0.0, 0.5, 1.0, 0.0, 0.9],
    ]
)


def population_of(scores: np.ndarray, islands: list[int] | None = None, island: int = 0) -> Population:
    """Programs p0, p1, ... at iterations 0, 1, ..., each in its own cell, archive score = mean row score."""
    scores = np.asarray(scores, dtype=float)
    islands = islands if islands is not None else [0] * len(scores)
    archive = IslandArchive(max(islands) + 1)
    for j, row in enumerate(scores):
        archive.place(islands[j], f"{j}:0", Elite(f"p{j}", j, float(row.mean())))
    return Population.from_archive(archive, island, {f"p{j}": row for j, row in enumerate(scores)})


# -- roster (Appendix C.5) ---------------------------------------------------------------------------------------


def test_binary_roster_keeps_the_specialist_and_stops_before_k() -> None:
    # |I(p) \ C^(0)|: A 3, B 2, C 1, D 2            -> A, m1 = 3, C^(1) = {0,1,2}
    # |I(p) \ C^(1)|: B 0, C 1 ({4}), D 2 ({3,5})   -> D, m2 = 2, C^(2) = {0,1,2,3,5}
    # |I(p) \ C^(2)|: B 0, C 1                      -> C, m3 = 1 (specialist kept for its single row)
    # |I(p) \ C^(3)|: B 0                           -> stop: 3 members although K = 10
    roster = build_roster(SCORES, 10, continuous=False, theta=0.9)
    assert roster.indices == (A, D, C)
    assert_allclose(roster.marginals, [3, 2, 1])


def test_continuous_roster_marginals() -> None:
    # c = 0:                     m(A) = 3.7, m(B) = 2.7, m(C) = 0.95, m(D) = 2.4          -> A, m1 = 3.7
    # c = (1, 1, .9, .8, 0, 0):  m(B) = (1-.9) + .2 = 0.3, m(C) = 0.95, m(D) = (1-.8) + .9 = 1.1 -> D, m2 = 1.1
    # c = (1, 1, .9, 1, 0, .9):  m(B) = 0.1, m(C) = 0.95                                   -> C, m3 = 0.95
    # c = (1, 1, .9, 1, .95, .9): m(B) = 0.1                                               -> B, m4 = 0.1
    roster = build_roster(SCORES, 10)
    assert roster.indices == (A, D, C, B)
    assert_allclose(roster.marginals, [3.7, 1.1, 0.95, 0.1])
    # the budget cuts the roster at K: B (fitness 0.45, second best) is left out, C (fitness 0.16) is kept
    capped = build_roster(SCORES, 3)
    assert capped.indices == (A, D, C)
    assert_allclose(capped.marginals, [3.7, 1.1, 0.95])


def test_continuous_roster_stops_when_nothing_adds_coverage() -> None:
    # p0 = (.5, .5): m = 1.0; then p1 = (.4, .5) adds max(0, .4-.5) + max(0, .5-.5) = 0 and p2 = 0: stop at 1 < K
    roster = build_roster(np.array([[0.5, 0.5], [0.4, 0.5], [0.0, 0.0]]), 10)
    assert roster.indices == (0,)
    assert_allclose(roster.marginals, [1.0])
    # nobody scores anything: empty roster
    assert build_roster(np.zeros((2, 3)), 10).indices == ()


def test_lp_and_jp_scores() -> None:
    # binary roster m = (3, 2, 1), N = 6
    m = np.array([3.0, 2.0, 1.0])
    assert_allclose(lp_score(m, 6, 1), 6 / 6)  # p = 1: fraction of rows covered
    assert_allclose(lp_score(m, 6, 2), math.sqrt(9 + 4 + 1) / 6)  # = 0.6236
    assert_allclose(jp_score(m, 6, 2), 14 / 36)  # = 0.3889 = L_2^2
    assert_allclose(jp_score(m, 6, 1), 1.0)
    # continuous roster m = (3.7, 1.1, 0.95, 0.1): sum m^2 = 13.69 + 1.21 + 0.9025 + 0.01 = 15.8125
    mc = np.array([3.7, 1.1, 0.95, 0.1])
    assert_allclose(jp_score(mc, 6, 2), 15.8125 / 36)
    assert_allclose(lp_score(mc, 6, 2), math.sqrt(15.8125) / 6)
    # consolidation: same total coverage 6, carried by one program, scores higher for p = 2
    assert jp_score(np.array([6.0]), 6, 2) == 1.0 > jp_score(m, 6, 2)


def test_delta_jp_of_a_child() -> None:
    # Continuous. Roster of {A, B, C}: A 3.7; then B 0.3, C 0.95 -> C; then B 0.3.  m = (3.7, 0.95, 0.3)
    #   J_2 = (13.69 + 0.9025 + 0.09) / 36 = 14.6825 / 36
    # Roster of {A, B, C, D} = (3.7, 1.1, 0.95, 0.1): J_2 = 15.8125 / 36.  Delta J_2 = 1.13 / 36
    assert_allclose(delta_jp(SCORES[:3], SCORES[D], 10, 2), 1.13 / 36)
    # Binary: {A, B, C} -> m = (3, 1) (B adds nothing), J_2 = 10/36; with D m = (3, 2, 1), J_2 = 14/36
    assert_allclose(delta_jp(SCORES[:3], SCORES[D], 10, 2, continuous=False, theta=0.9), 4 / 36)
    # A child that repeats B adds nothing (it loses the tie to the existing B)
    assert_allclose(delta_jp(SCORES, SCORES[B], 10, 2), 0.0, atol=1e-12)
    # A first program: J_2(R | {}) = 0, so Delta J_2 = J_2 of its own roster = (3.7 / 6)^2
    assert_allclose(delta_jp(np.zeros((0, 6)), SCORES[A], 10, 2), (3.7 / 6) ** 2)


def test_lp_roster_probabilities_for_p_0_1_2() -> None:
    pop = population_of(SCORES)
    binary = {p: LpRosterPolicy(p=p, continuous=False, theta=0.9).probabilities(pop) for p in (0, 1, 2)}
    # roster (A, D, C) with m = (3, 2, 1); B is not on the roster. Vectors are in program order (A, B, C, D).
    assert_allclose(binary[0], [1 / 3, 0, 1 / 3, 1 / 3])  # p = 0: uniform over the roster
    assert_allclose(binary[1], [3 / 6, 0, 1 / 6, 2 / 6])  # p = 1: m_j / sum m
    assert_allclose(binary[2], [9 / 14, 0, 1 / 14, 4 / 14])  # p = 2: m_j^2 / sum m^2
    # default: continuous, p = 2, K = 10: m^2 = (13.69, 1.21, 0.9025, 0.01) for (A, D, C, B), sum 15.8125
    assert_allclose(LpRosterPolicy().probabilities(pop), np.array([13.69, 0.01, 0.9025, 1.21]) / 15.8125)


def test_lp_roster_breaks_ties_by_earliest_iteration_and_falls_back_to_uniform() -> None:
    # two programs each covering one row (m = 1 each); program "late" is listed first but was found later
    archive = IslandArchive(1)
    archive.place(0, "0:0", Elite("late", 5, 0.5))
    archive.place(0, "1:0", Elite("early", 2, 0.5))
    pop = Population(("late", "early"), (5, 2), np.array([[0.0, 1.0], [1.0, 0.0]]), archive, 0)
    assert LpRosterPolicy().roster(pop).indices == (1, 0)
    # no coverage evidence at all: uniform over the population
    zero = Population(("late", "early"), (5, 2), np.zeros((2, 2)), archive, 0)
    assert_allclose(LpRosterPolicy().probabilities(zero), [0.5, 0.5])


# -- rare capability (Appendix C.5.1) ----------------------------------------------------------------------------


def test_rare_capability_terms_and_mixture() -> None:
    # solved (theta = 0.9): A {0,1,2}, B {0,2}, C {4}, D {3,5}
    # rho = (2/4, 1/4, 2/4, 1/4, 1/4, 1/4); h = (1 - rho)^2 = (.25, .5625, .25, .5625, .5625, .5625)
    # H: A = .25 + .5625 + .25 = 1.0625, B = .5, C = .5625, D = .5625 + .5625 = 1.125; max H = 1.125
    # H~ = H / 1.125: A 17/18, B 4/9, C 1/2, D 1
    # fitness = sum / 6: A 3.7/6, B 2.7/6, C .95/6, D 2.4/6 -> Phi~ = (sum - .95) / 2.75: A 1, B 7/11, C 0, D 29/55
    # exponent = 5 * (.5 Phi~ + .5 H~^2):
    #   A 2.5 + 2.5 (17/18)^2 = 4.7299, B 2.5 (7/11) + 2.5 (4/9)^2 = 2.0847, C 2.5 / 4 = 0.625, D 2.5 (29/55) + 2.5 = 3.8182
    # q_rare = softmax(exponent) = (0.6715, 0.0477, 0.0111, 0.2698)
    terms = rare_terms(SCORES)
    assert_allclose(terms.rho, [0.5, 0.25, 0.5, 0.25, 0.25, 0.25])
    assert_allclose(terms.h, [0.25, 0.5625, 0.25, 0.5625, 0.5625, 0.5625])
    assert_allclose(terms.mass, [1.0625, 0.5, 0.5625, 1.125])
    assert_allclose(terms.mass_norm, [17 / 18, 4 / 9, 1 / 2, 1.0])
    assert_allclose(terms.fitness_norm, [1.0, 7 / 11, 0.0, 29 / 55])
    exponent = np.array(
        [2.5 + 2.5 * (17 / 18) ** 2, 2.5 * 7 / 11 + 2.5 * (4 / 9) ** 2, 2.5 * 0.25, 2.5 * 29 / 55 + 2.5]
    )
    q_rare = np.exp(exponent) / np.exp(exponent).sum()
    assert_allclose(terms.q_rare, q_rare)
    assert_allclose(terms.q_rare, [0.67145644, 0.04766737, 0.01107301, 0.26980317], rtol=1e-6)

    # q = 0.8 q_rare + 0.2 q_base, q_base = lp_roster (continuous, p = 2) = (13.69, .01, .9025, 1.21) / 15.8125
    pop = population_of(SCORES)
    q_base = np.array([13.69, 0.01, 0.9025, 1.21]) / 15.8125
    assert_allclose(RareCapabilityPolicy().probabilities(pop), 0.8 * q_rare + 0.2 * q_base)
    assert_allclose(
        RareCapabilityPolicy().probabilities(pop), [0.71031931, 0.03826038, 0.02027343, 0.23114688]
    )
    # an injected base: eps = 1 is exactly the base policy's distribution
    assert_allclose(RareCapabilityPolicy(BestPolicy(), eps=1.0).probabilities(pop), [1, 0, 0, 0])


def test_rare_capability_symmetric_specialists_and_degenerate_inputs() -> None:
    # two specialists with one equally rare row each and equal fitness are sampled symmetrically (C.5.1)
    terms = rare_terms(np.array([[1.0, 0.0], [0.0, 1.0]]))
    assert_allclose(terms.q_rare, [0.5, 0.5])
    # nothing solved and equal fitness: H~ = 0, Phi~ = 0, q_rare uniform
    assert_allclose(rare_terms(np.zeros((3, 4))).q_rare, [1 / 3, 1 / 3, 1 / 3])
    # a huge population of rows does not overflow exp (H is normalised by its maximum)
    wide = np.zeros((2, 5000))
    wide[0, :] = 1.0
    assert np.isfinite(rare_terms(wide, beta=50.0).q_rare).all()


# -- Pareto frontier (Appendix D.1, GEPA) ------------------------------------------------------------------------

PARETO = np.array(
    [
        [1.0, 0.5, 0.0, 0.0, 0.0],  # P0
        [1.0, 0.7, 0.0, 0.3, 0.0],  # P1
        [0.2, 0.7, 0.9, 0.0, 0.0],  # P2
        [0.0, 0.0, 0.9, 0.0, 0.0],  # P3
    ]
)


def test_pareto_frontier_membership_domination_and_win_counts() -> None:
    # row max = (1, .7, .9, .3, 0): row 4 is ignored (nobody scores on it)
    # best sets: r0 {P0, P1}, r1 {P1, P2}, r2 {P2, P3}, r3 {P1}  -> wins P0 1, P1 3, P2 2, P3 1
    # P0 is dominated by P1 (>= everywhere, > on r1 and r3); P3 by P2 (>= everywhere, > on r0, r1)
    # frontier {P1, P2}; Pr = wins / 5 = (0, 3/5, 2/5, 0)
    frontier = pareto_frontier(PARETO)
    assert frontier.members == (1, 2)
    assert_allclose(frontier.wins, [3, 2])
    assert_allclose(ParetoPolicy().probabilities(population_of(PARETO)), [0, 0.6, 0.4, 0])


def test_pareto_keeps_identical_programs_and_falls_back_to_uniform() -> None:
    # identical vectors do not dominate each other: both kept, one win each
    frontier = pareto_frontier(np.array([[1.0, 0.0], [1.0, 0.0], [0.5, 0.0]]))
    assert frontier.members == (0, 1)
    assert_allclose(frontier.wins, [1, 1])
    # all rows zero: empty frontier, uniform draw
    assert pareto_frontier(np.zeros((2, 3))).members == ()
    assert_allclose(ParetoPolicy().probabilities(population_of(np.zeros((2, 3)))), [0.5, 0.5])


# -- MAP-Elites and select-best (Appendix C.4, D.1) --------------------------------------------------------------


def _map_elites_population(island: int) -> Population:
    archive = IslandArchive(3)
    for i, (cell, score) in enumerate([("0:0", 0.1), ("0:1", 0.9), ("1:0", 0.4)]):
        archive.place(0, cell, Elite(f"p{i}", i, score))
    archive.place(1, "0:0", Elite("p3", 3, 0.2))
    rows = {"p0": [0.1], "p1": [0.9], "p2": [0.4], "p3": [0.2]}
    return Population.from_archive(archive, island, rows)


def test_map_elites_probabilities_mix_its_three_modes() -> None:
    # island 0: scores (.1, .9, .4), weights s + 1e-3 = (.101, .901, .401), sum 1.403
    # P = 0.2/3 + 0.65 [best = p1] + 0.15 * w / 1.403; p3 (island 1) gets 0
    probs = MapElitesPolicy().probabilities(_map_elites_population(0))
    expected = [
        0.2 / 3 + 0.15 * 0.101 / 1.403,
        0.2 / 3 + 0.65 + 0.15 * 0.901 / 1.403,
        0.2 / 3 + 0.15 * 0.401 / 1.403,
        0.0,
    ]
    assert_allclose(probs, expected)
    # island 1 holds only p3: all three modes pick it
    assert_allclose(MapElitesPolicy().probabilities(_map_elites_population(1)), [0, 0, 0, 1])
    # island 2 is empty: fall back to the whole archive, 4 elites, best p1, weights sum .101+.901+.401+.201 = 1.604
    w = np.array([0.101, 0.901, 0.401, 0.201])
    fallback = 0.2 / 4 + 0.15 * w / 1.604 + 0.65 * np.array([0, 1, 0, 0])
    assert_allclose(MapElitesPolicy().probabilities(_map_elites_population(2)), fallback)


def test_best_policy_picks_the_island_best() -> None:
    assert_allclose(BestPolicy().probabilities(_map_elites_population(0)), [0, 1, 0, 0])
    assert_allclose(BestPolicy().probabilities(_map_elites_population(1)), [0, 0, 0, 1])
    assert BestPolicy().select(_map_elites_population(0), np.random.default_rng(0)) == "p1"


# -- sampling, determinism, registry, validation -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_select_draws_follow_probabilities(name: str) -> None:
    pop = _map_elites_population(0) if name in ("map_elites", "best") else population_of(SCORES)
    policy = POLICIES[name]()
    probs = policy.probabilities(pop)
    assert_allclose(probs.sum(), 1.0)
    rng = np.random.default_rng(12345)
    draws = [policy.select(pop, rng) for _ in range(8000)]
    freq = np.array([draws.count(pid) for pid in pop.program_ids]) / len(draws)
    assert_allclose(freq, probs, atol=0.02)  # 8000 draws: sd <= 0.0056


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_select_is_deterministic_and_uses_one_choice_call(name: str) -> None:
    pop = _map_elites_population(0) if name in ("map_elites", "best") else population_of(SCORES)
    policy = POLICIES[name]()
    first = [policy.select(pop, np.random.default_rng(7)) for _ in range(3)]
    assert len(set(first)) == 1
    rng_a, rng_b = np.random.default_rng(99), np.random.default_rng(99)
    picks_a = [policy.select(pop, rng_a) for _ in range(50)]
    picks_b = [
        pop.program_ids[int(rng_b.choice(pop.n_programs, p=policy.probabilities(pop)))] for _ in range(50)
    ]
    assert picks_a == picks_b
    assert rng_a.random() == rng_b.random()  # the same number of draws were consumed


def test_registry_and_default() -> None:
    assert set(POLICIES) == {"map_elites", "best", "pareto", "lp_roster", "rare_capability"}
    assert DEFAULT_POLICY == "lp_roster"
    for name, factory in POLICIES.items():
        assert factory().name == name


def test_population_validation() -> None:
    archive = IslandArchive(1)
    archive.place(0, "0:0", Elite("p0", 0, 0.5))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Population(("p0",), (0,), np.array([[1.5]]), archive, 0)
    with pytest.raises(ValueError, match="agree"):
        Population(("p0", "p1"), (0, 1), np.array([[0.5]]), archive, 0)
    with pytest.raises(ValueError, match="island"):
        Population(("p0",), (0,), np.array([[0.5]]), archive, 1)
    with pytest.raises(KeyError):
        Population.from_archive(archive, 0, {})
    pop = Population.from_archive(archive, 0, {"p0": [0.25, 0.75]})
    assert_allclose(pop.fitness, [0.5])
    assert not pop.scores.flags.writeable
    with pytest.raises(ValueError, match="empty"):
        LpRosterPolicy().select(Population.from_archive(IslandArchive(1), 0, {}), np.random.default_rng(0))


# -- a parent the mutator still has something for (engine.parents, issue 26) -------------------------------------
@pytest.mark.parametrize("name", sorted(POLICIES))
def test_the_first_draw_is_the_policys_own_and_redraws_skip_exhausted_parents(name: str) -> None:
    policy, population = POLICIES[name](), population_of(SCORES)
    # nothing exhausted: exactly the policy's draw, so a run that never exhausts a parent is the run it was
    for seed in range(20):
        alone = policy.select(population, np.random.default_rng(seed))
        assert draw_parent(policy, population, np.random.default_rng(seed), set()) == alone
    # the policy's favourite exhausted: pi'(e) = pi(e) [e open] / sum, or uniform over the open ones
    p = policy.probabilities(population)
    favourite = population.program_ids[int(np.argmax(p))]
    open_ = np.array([pid != favourite for pid in population.program_ids], dtype=float)
    expected = p * open_ / (p * open_).sum() if (p * open_).sum() > 0 else open_ / open_.sum()
    rng = np.random.default_rng(7)
    drawn = [draw_parent(policy, population, rng, {favourite}) for _ in range(2000)]
    assert favourite not in drawn
    frequencies = [drawn.count(pid) / len(drawn) for pid in population.program_ids]
    assert_allclose(frequencies, expected, atol=0.035)


def test_no_open_parent_is_none_and_the_reason_is_one_line() -> None:
    population = population_of(SCORES)
    everything = set(population.program_ids)
    assert draw_parent(BestPolicy(), population, np.random.default_rng(0), everything) is None
    assert redraw(BestPolicy(), population, np.random.default_rng(0), everything) is None
    reason = nothing_left(population, everything)
    assert reason == (
        "nothing left to try: the mutator has no untried edit for any of the 4 programs in the archive "
        "(4 exhausted parents in all)"
    )
    # select-best puts all its mass on A: with A exhausted the others are drawn uniformly
    rng = np.random.default_rng(3)
    drawn = [redraw(BestPolicy(), population, rng, {"p0"}) for _ in range(900)]
    assert set(drawn) == {"p1", "p2", "p3"} and min(drawn.count(p) for p in ("p1", "p2", "p3")) > 250
