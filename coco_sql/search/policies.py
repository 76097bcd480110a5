"""Parent policies: who gets mutated next. Each is a small class with an injected RNG and no I/O.

The loop owns the RNG (one stream per iteration, derived from the run seed), so a policy's choice is a pure
function of the `Population` and that stream: a resumed run picks the same parents as an uninterrupted one. Every
policy exposes its exact distribution, `probabilities(population)`, over `population.program_ids`, and `select`
draws from it with one `rng.choice` call.

    map_elites       MAP-Elites exploration / exploitation / fitness-weighted draw on the island (Appendix C.4)
    best             select-best baseline (Appendix D.1)
    pareto           per-row Pareto frontier sampled by win count, as in GEPA (Appendix D.1)
    lp_roster        budgeted l_p roster, Pr(p_j) = m_j^p / sum_l m_l^p (Appendix C.5); default for row-scored tasks
    rare_capability  rare-capability carriers mixed with a base policy (Appendix C.5.1)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from coco_sql.search.archive import Elite
from coco_sql.search.pareto import ParetoPolicy
from coco_sql.search.population import ParentPolicy, Population, draw
from coco_sql.search.rare import RareCapabilityPolicy
from coco_sql.search.roster import LpRosterPolicy

DEFAULT_POLICY = LpRosterPolicy.name


def _island_elites(population: Population) -> list[Elite]:
    """The elites of the population's island, or of the whole archive if that island is empty."""
    return population.archive.elites(population.island) or population.archive.elites()


def _best_of(elites: list[Elite]) -> Elite:
    """Highest archive score; ties go to the earliest program (the simplest explanation found first)."""
    return min(elites, key=lambda e: (-e.score, e.iteration, e.program_id))


class MapElitesPolicy:
    """MAP-Elites parent selection over islands (CoCoEvolve Appendix C.4, after OpenEvolve).

    Over the island's elites E (the whole archive's if the island is empty), s_e = the elite's archive score, the
    three modes mixed into one exact distribution:

      P(e) = w_explore * 1/|E|                                    (exploration: uniform)
           + w_elite   * I[e = argmax_e' s_e']                    (exploitation: the island's best, ties earliest)
           + (1 - w_explore - w_elite) * (s_e + eps) / sum_e' (s_e' + eps)   (fitness-weighted)

    Defaults w_explore = 0.2, w_elite = 0.65, as in the paper's math and ADRS runs; eps = 1e-3 keeps zero-score
    elites selectable. Programs outside E get probability 0; every elite in E must be in the population.
    """

    name = "map_elites"

    def __init__(self, exploration: float = 0.2, exploitation: float = 0.65, eps: float = 1e-3) -> None:
        if not (exploration >= 0 and exploitation >= 0 and exploration + exploitation <= 1):
            raise ValueError("exploration and exploitation weights must be >= 0 and sum to at most 1")
        if not eps > 0:
            raise ValueError("eps must be > 0")
        self.exploration = exploration
        self.exploitation = exploitation
        self.eps = eps

    def probabilities(self, population: Population) -> np.ndarray:
        elites = _island_elites(population)
        if not elites:
            raise ValueError("cannot select a parent from an empty archive")
        index = [population.index(e.program_id) for e in elites]
        weights = np.array([e.score + self.eps for e in elites], dtype=float)
        local = np.full(len(elites), self.exploration / len(elites))
        local[elites.index(_best_of(elites))] += self.exploitation
        local += (1.0 - self.exploration - self.exploitation) * weights / weights.sum()
        probs = np.zeros(population.n_programs)
        probs[index] = local
        return probs

    def select(self, population: Population, rng: np.random.Generator) -> str:
        return draw(population, self.probabilities(population), rng)


class BestPolicy:
    """Select-best baseline (Appendix D.1): P(e) = I[e = argmax_e' s_e'] over the island's elites (the whole
    archive's if the island is empty), s_e the archive score, ties to the earliest program."""

    name = "best"

    def probabilities(self, population: Population) -> np.ndarray:
        elites = _island_elites(population)
        if not elites:
            raise ValueError("cannot select a parent from an empty archive")
        probs = np.zeros(population.n_programs)
        probs[population.index(_best_of(elites).program_id)] = 1.0
        return probs

    def select(self, population: Population, rng: np.random.Generator) -> str:
        return draw(population, self.probabilities(population), rng)


POLICIES: dict[str, Callable[..., ParentPolicy]] = {
    MapElitesPolicy.name: MapElitesPolicy,
    BestPolicy.name: BestPolicy,
    ParetoPolicy.name: ParetoPolicy,
    LpRosterPolicy.name: LpRosterPolicy,
    RareCapabilityPolicy.name: RareCapabilityPolicy,
}

__all__ = ["DEFAULT_POLICY", "POLICIES", "BestPolicy", "MapElitesPolicy", "ParentPolicy", "Population"]
