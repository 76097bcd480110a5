"""GEPA-style per-instance Pareto-frontier parent selection (the "pareto-frontier" arm of CoCoEvolve Appendix D.1).

"pareto-frontier samples the per-instance Pareto frontier by win count, as in GEPA."
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coco_sql.search.population import Population, draw, uniform


@dataclass(frozen=True, eq=False)
class Frontier:
    """`members` (row indices of `scores`, ascending) and each member's `wins` (rows where it is among the best)."""

    members: tuple[int, ...]
    wins: np.ndarray


def pareto_frontier(scores: np.ndarray) -> Frontier:
    """The per-row Pareto frontier with win counts (Appendix D.1, after GEPA).

    For each row i with M_i = max_p s_i(p) > 0, the row's best set is B_i = {p : s_i(p) = M_i} (rows with M_i = 0
    are ignored: nobody solves them). Candidates are the union of the B_i. A candidate p is dropped when another
    program q dominates it: s_i(q) >= s_i(p) for every row i and s_i(q) > s_i(p) for some i. Each surviving
    member's win count is w(p) = |{i : M_i > 0, p in B_i}|.
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D (programs x rows), got shape {scores.shape}")
    if scores.shape[0] == 0 or scores.shape[1] == 0:
        return Frontier((), np.zeros(0))
    row_max = scores.max(axis=0)
    best = (scores >= row_max) & (row_max > 0)  # best[p, i]: p is among row i's best, for a solved row
    wins = best.sum(axis=1)
    members: list[int] = []
    for p in np.flatnonzero(wins > 0):
        geq = (scores >= scores[p]).all(axis=1)
        gt = (scores > scores[p]).any(axis=1)
        if not (geq & gt).any():
            members.append(int(p))
    return Frontier(tuple(members), wins[members].astype(float))


class ParetoPolicy:
    """Pareto-frontier parent selection by win count (Appendix D.1, as in GEPA):

        Pr(p) = w(p) / sum_{q in F} w(q)   for p in the frontier F (`pareto_frontier`), 0 otherwise.

    Draws from all islands. If no row has a positive best score (empty frontier), the draw is uniform over the
    population.
    """

    name = "pareto"

    def probabilities(self, population: Population) -> np.ndarray:
        frontier = pareto_frontier(population.scores)
        if not frontier.members:
            return uniform(population.n_programs)
        probs = np.zeros(population.n_programs)
        probs[list(frontier.members)] = frontier.wins / frontier.wins.sum()
        return probs

    def select(self, population: Population, rng: np.random.Generator) -> str:
        return draw(population, self.probabilities(population), rng)
