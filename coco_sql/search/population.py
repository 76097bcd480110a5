"""What a parent policy sees, and the protocol every parent policy implements.

A policy is a pure function of a `Population` and an injected RNG: it exposes its exact selection distribution
(`probabilities`) and draws from it with a single `rng.choice` call (`select`), so a run that resumes with the
same per-iteration RNG stream picks the same parent, and a mixture policy (Appendix C.5.1) can use any other
policy's distribution as its q_base.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from coco_sql.search.archive import IslandArchive


@dataclass(frozen=True, eq=False)
class Population:
    """What a parent policy sees: candidate parents, their per-row validation scores, and the MAP-Elites archive.

    `scores[j, i]` is program j's score on row (dimension) i, in [0, 1]; every program is scored on the same rows
    in the same order. `program_ids` are distinct and, when built with `from_archive`, are the archive's elites
    over all islands ordered by (iteration, program_id). `scores` is stored as a read-only float copy.
    """

    program_ids: tuple[str, ...]
    iterations: tuple[int, ...]
    scores: np.ndarray
    archive: IslandArchive
    island: int

    def __post_init__(self) -> None:
        scores = np.array(self.scores, dtype=float, copy=True)
        if scores.ndim == 1 and scores.size == 0:
            scores = scores.reshape(0, 0)
        if scores.ndim != 2:
            raise ValueError(f"scores must be 2-D (programs x rows), got shape {scores.shape}")
        if not (scores.shape[0] == len(self.program_ids) == len(self.iterations)):
            raise ValueError(
                f"{len(self.program_ids)} program ids, {len(self.iterations)} iterations and "
                f"{scores.shape[0]} score rows must agree"
            )
        if len(set(self.program_ids)) != len(self.program_ids):
            raise ValueError("program ids must be distinct")
        if scores.size and not (np.isfinite(scores).all() and scores.min() >= 0.0 and scores.max() <= 1.0):
            raise ValueError("row scores must be finite and in [0, 1]")
        if not 0 <= self.island < self.archive.n_islands:
            raise ValueError(f"island {self.island} is outside 0..{self.archive.n_islands - 1}")
        scores.setflags(write=False)
        object.__setattr__(self, "program_ids", tuple(self.program_ids))
        object.__setattr__(self, "iterations", tuple(int(t) for t in self.iterations))
        object.__setattr__(self, "scores", scores)

    @classmethod
    def from_archive(
        cls,
        archive: IslandArchive,
        island: int,
        row_scores: Mapping[str, Sequence[float] | np.ndarray],
    ) -> Population:
        """The archive's elites over all islands (order of `archive.elites()`), with their per-row scores.

        `row_scores[program_id]` is that program's validation score per row, every program in the same row order
        (e.g. sorted by instance id).
        """
        elites = archive.elites()
        ids = tuple(e.program_id for e in elites)
        missing = [pid for pid in ids if pid not in row_scores]
        if missing:
            raise KeyError(f"no row scores for elites {missing}")
        rows = [np.asarray(row_scores[pid], dtype=float) for pid in ids]
        if len({r.shape for r in rows}) > 1:
            raise ValueError("every elite must be scored on the same rows")
        n_rows = rows[0].shape[0] if rows else 0
        scores = np.vstack(rows) if rows else np.zeros((0, n_rows))
        return cls(ids, tuple(e.iteration for e in elites), scores, archive, island)

    @property
    def n_programs(self) -> int:
        return len(self.program_ids)

    @property
    def n_rows(self) -> int:
        return int(self.scores.shape[1])

    @property
    def fitness(self) -> np.ndarray:
        """Mean row score per program, f(p) = (1/N) sum_i s_i(p); zeros when there are no rows."""
        if self.n_rows == 0:
            return np.zeros(self.n_programs)
        return self.scores.mean(axis=1)

    def index(self, program_id: str) -> int:
        return self.program_ids.index(program_id)

    def tie_order(self) -> np.ndarray:
        """Program indices sorted earliest first: by (iteration, position), for tie-breaks."""
        return np.array(sorted(range(self.n_programs), key=lambda j: (self.iterations[j], j)), dtype=int)


class ParentPolicy(Protocol):
    name: str

    def probabilities(self, population: Population) -> np.ndarray:
        """The exact selection distribution over `population.program_ids` (non-negative, sums to 1)."""
        ...

    def select(self, population: Population, rng: np.random.Generator) -> str:
        """Draw a parent's program id from `probabilities(population)` with one `rng.choice` call."""
        ...


def draw(population: Population, probabilities: np.ndarray, rng: np.random.Generator) -> str:
    """Sample one program id from `probabilities` with exactly one `rng.choice` call."""
    if population.n_programs == 0:
        raise ValueError("cannot select a parent from an empty population")
    return population.program_ids[int(rng.choice(population.n_programs, p=probabilities))]


def normalised(weights: np.ndarray) -> np.ndarray:
    """weights / sum(weights); raises on a zero or negative total (callers handle their fallbacks first)."""
    total = float(weights.sum())
    if not total > 0:
        raise ValueError("selection weights must have a positive sum")
    return weights / total


def uniform(n: int) -> np.ndarray:
    if n == 0:
        raise ValueError("cannot select a parent from an empty population")
    return np.full(n, 1.0 / n)
