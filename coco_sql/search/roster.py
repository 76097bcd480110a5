"""Budgeted l_p population roster and its parent policy (CoCoEvolve Appendix C.5).

Each program p is scored on N dimensions (here: validation rows), s_i(p) in [0, 1]. A budgeted roster of at most K
programs is built greedily for maximum coverage; its ordered marginals m = (m_1, ..., m_|R|) define the population
score L_p / J_p (used to judge a child by Delta J_p) and the parent distribution Pr(p_j) = m_j^p / sum_l m_l^p.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coco_sql.search.population import Population, draw, uniform

DEFAULT_K = 10
DEFAULT_THETA = 0.9
DEFAULT_P = 2.0


@dataclass(frozen=True, eq=False)
class Roster:
    """The greedy roster: `indices[j]` is the row of `scores` picked j-th, with marginal contribution `marginals[j]`."""

    indices: tuple[int, ...]
    marginals: np.ndarray


def build_roster(
    scores: np.ndarray, k: int = DEFAULT_K, *, continuous: bool = True, theta: float = DEFAULT_THETA
) -> Roster:
    """Greedy budgeted max-coverage roster (Appendix C.5, "Budgeted diversity roster").

    Binary form (continuous=False), I(p) = {i in [N] : s_i(p) >= theta}, R^(0) = C^(0) = {}:
        p_j = argmax_{p in A \\ R^(j-1)} |I(p) \\ C^(j-1)|,   m_j = |I(p_j) \\ C^(j-1)|,
        R^(j) = R^(j-1) + {p_j},   C^(j) = C^(j-1) | I(p_j).
    Continuous form (continuous=True, the paper's AI-function setting), coverage vector c^(0) = 0:
        m(p) = sum_i max(0, s_i(p) - c_i^(j-1)),   p_j = argmax m(p),   m_j = m(p_j),
        c^(j) = max(c^(j-1), s(p_j))  (elementwise).
    Construction stops after K programs or when no remaining program has a positive marginal. Ties in the argmax
    go to the lowest row index of `scores` (callers order rows earliest program first).
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D (programs x rows), got shape {scores.shape}")
    if k < 0:
        raise ValueError("the roster budget K must be >= 0")
    values = scores if continuous else (scores >= theta).astype(float)
    covered = np.zeros(scores.shape[1])
    remaining = np.ones(scores.shape[0], dtype=bool)
    indices: list[int] = []
    marginals: list[float] = []
    while len(indices) < k and remaining.any():
        gains = np.clip(values - covered, 0.0, None).sum(axis=1)
        gains[~remaining] = -np.inf
        best = int(np.argmax(gains))  # first maximum: the earliest program wins ties
        if not gains[best] > 0:
            break
        indices.append(best)
        marginals.append(float(gains[best]))
        covered = np.maximum(covered, values[best])
        remaining[best] = False
    return Roster(tuple(indices), np.array(marginals, dtype=float))


def lp_score(marginals: np.ndarray, n: int, p: float = DEFAULT_P) -> float:
    """Population l_p score (Appendix C.5, "Population l_p score"): L_p(R) = ||m||_p / N = (sum_j m_j^p)^(1/p) / N.

    p > 0. At p = 1 (binary form) it is the fraction of dimensions the roster covers.
    """
    if not p > 0:
        raise ValueError("L_p needs p > 0")
    if n <= 0:
        raise ValueError("N must be positive")
    m = np.asarray(marginals, dtype=float)
    return float(np.sum(m**p) ** (1.0 / p) / n)


def jp_score(marginals: np.ndarray, n: int, p: float = DEFAULT_P) -> float:
    """J_p(R) = L_p(R)^p = sum_j m_j^p / N^p (Appendix C.5); same ordering as L_p for fixed p."""
    if not p > 0:
        raise ValueError("J_p needs p > 0")
    if n <= 0:
        raise ValueError("N must be positive")
    m = np.asarray(marginals, dtype=float)
    return float(np.sum(m**p) / float(n) ** p)


def delta_jp(
    scores_population: np.ndarray,
    child_scores: np.ndarray,
    k: int = DEFAULT_K,
    p: float = DEFAULT_P,
    *,
    continuous: bool = True,
    theta: float = DEFAULT_THETA,
) -> float:
    """A child's value as a population objective (Appendix C.5, "l_p as an optimization objective"):

        Delta J_p = J_p(R | A + {child}) - J_p(R | A),

    each roster rebuilt greedily from its pool. The child is appended last, so it loses argmax ties to existing
    programs. An empty population (0 x N) gives J_p(R | A) = 0.
    """
    population = np.asarray(scores_population, dtype=float)
    child = np.asarray(child_scores, dtype=float).reshape(1, -1)
    if population.size == 0:
        population = population.reshape(0, child.shape[1])
    if population.ndim != 2 or population.shape[1] != child.shape[1]:
        raise ValueError("the child must be scored on the same rows as the population")
    n = child.shape[1]
    before = build_roster(population, k, continuous=continuous, theta=theta)
    after = build_roster(np.vstack([population, child]), k, continuous=continuous, theta=theta)
    return jp_score(after.marginals, n, p) - jp_score(before.marginals, n, p)


def roster_probabilities(marginals: np.ndarray, p: float = DEFAULT_P) -> np.ndarray:
    """Pr(p_j | R) = m_j^p / sum_l m_l^p (Appendix C.5, "l_p as a parent-selection policy").

    p = 0 is uniform over roster members. Computed as (m_j / max m)^p, which is the same distribution and does not
    overflow for large N or p.
    """
    m = np.asarray(marginals, dtype=float)
    if m.size == 0:
        raise ValueError("an empty roster has no selection distribution")
    if p < 0:
        raise ValueError("the roster exponent p must be >= 0")
    weights = np.ones_like(m) if p == 0 else (m / m.max()) ** p
    return weights / weights.sum()


class LpRosterPolicy:
    """Budgeted l_p roster parent selection (CoCoEvolve Appendix C.5; the "lp" arm of Appendix D.1).

    Build the greedy roster R (`build_roster`, at most K members, continuous coverage by default) over the whole
    population (all islands, as in D.1), rows tie-broken earliest program first, then sample member j with

        Pr(p_j | R) = m_j^p / sum_l m_l^p,   default p = 2 (p = 0: uniform over R).

    Programs outside the roster get probability 0. If the roster is empty (no program scores above 0 on any row,
    or no row clears theta in the binary form), there is no coverage evidence and the draw is uniform over the
    population.
    """

    name = "lp_roster"

    def __init__(
        self,
        k: int = DEFAULT_K,
        p: float = DEFAULT_P,
        *,
        continuous: bool = True,
        theta: float = DEFAULT_THETA,
    ) -> None:
        if k < 1:
            raise ValueError("the roster budget K must be >= 1")
        if p < 0:
            raise ValueError("the roster exponent p must be >= 0")
        self.k = k
        self.p = p
        self.continuous = continuous
        self.theta = theta

    def roster(self, population: Population) -> Roster:
        """The roster with `indices` into `population.program_ids` (greedy ties: earliest iteration first)."""
        order = population.tie_order()
        local = build_roster(population.scores[order], self.k, continuous=self.continuous, theta=self.theta)
        return Roster(tuple(int(order[j]) for j in local.indices), local.marginals)

    def probabilities(self, population: Population) -> np.ndarray:
        roster = self.roster(population)
        if not roster.indices:
            return uniform(population.n_programs)
        probs = np.zeros(population.n_programs)
        probs[list(roster.indices)] = roster_probabilities(roster.marginals, self.p)
        return probs

    def select(self, population: Population, rng: np.random.Generator) -> str:
        return draw(population, self.probabilities(population), rng)
