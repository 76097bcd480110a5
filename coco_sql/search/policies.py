"""Parent policies: who gets mutated next. Each is a small class with an injected RNG and no I/O.

The loop owns the RNG (one stream per iteration, derived from the run seed), so a policy's choice is a pure
function of the archive and that stream: a resumed run picks the same parents as an uninterrupted one.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from coco_sql.search.archive import Elite, IslandArchive


class ParentPolicy(Protocol):
    name: str

    def select(self, archive: IslandArchive, island: int, rng: np.random.Generator) -> Elite:
        """Choose a parent among the elites of `island` (the whole archive if that island is empty)."""
        ...


class MapElitesPolicy:
    """MAP-Elites parent selection over islands (CoCoEvolve Appendix C.4, after OpenEvolve).

    With u ~ U[0, 1) drawn from the iteration's RNG:
      u < w_explore                      -> uniform over the island's elites          (exploration)
      w_explore <= u < w_explore+w_elite -> the island's best elite                   (exploitation)
      otherwise                          -> P(e) = (s_e + eps) / sum_e' (s_e' + eps)  (fitness-weighted)
    Defaults w_explore = 0.2, w_elite = 0.65, as in the paper's math and ADRS runs; eps = 1e-3 keeps
    zero-score elites selectable.
    """

    name = "map_elites"

    def __init__(self, exploration: float = 0.2, exploitation: float = 0.65, eps: float = 1e-3) -> None:
        if not (exploration >= 0 and exploitation >= 0 and exploration + exploitation <= 1):
            raise ValueError("exploration and exploitation weights must be >= 0 and sum to at most 1")
        self.exploration = exploration
        self.exploitation = exploitation
        self.eps = eps

    def select(self, archive: IslandArchive, island: int, rng: np.random.Generator) -> Elite:
        elites = archive.elites(island) or archive.elites()
        if not elites:
            raise ValueError("cannot select a parent from an empty archive")
        u = rng.random()
        if u < self.exploration:
            return elites[int(rng.integers(len(elites)))]
        if u < self.exploration + self.exploitation:
            return min(elites, key=lambda e: (-e.score, e.iteration))
        weights = np.array([e.score + self.eps for e in elites], dtype=float)
        return elites[int(rng.choice(len(elites), p=weights / weights.sum()))]


class BestPolicy:
    """Select-best baseline: always the highest-scoring elite (ties: earliest)."""

    name = "best"

    def select(self, archive: IslandArchive, island: int, rng: np.random.Generator) -> Elite:
        best = archive.best(island) or archive.best()
        if best is None:
            raise ValueError("cannot select a parent from an empty archive")
        return best


POLICIES: dict[str, type[MapElitesPolicy] | type[BestPolicy]] = {
    MapElitesPolicy.name: MapElitesPolicy,
    BestPolicy.name: BestPolicy,
}
