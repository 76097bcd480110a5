"""Which tested draft a proposal commits: a draw among the near-best, from the run's RNG.

A strictly greedy pick (always the draft with the largest measured gain) makes the search a deterministic path:
the seed only matters where something else draws, and on AI pipelines nothing else did, so seeds 1 and 2 gave
byte-identical champions (issue 15, part 5). The gains are measured on a few hundred training rows, so drafts
within a row or two of the best are ties in all but name: drawing among them costs almost nothing per
iteration, and the edits not taken stay available to later iterations (a reordering, not a loss). The draw
uses only the injected RNG (the mutator's stream of the iteration), so a seed still fixes a run and resume
replays it exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NearBest:
    """Which drafts count as ties with the best one: those that gain (> 0) and are within
    max(`relative` * best gain, `absolute`) of it, at most `top` of them (the best always among them).
    `relative=0, absolute=0` draws among exact ties only."""

    relative: float = 0.0
    absolute: float = 0.0
    top: int = 1

    def __post_init__(self) -> None:
        if self.relative < 0 or self.absolute < 0 or self.top < 1:
            raise ValueError("NearBest needs relative >= 0, absolute >= 0 and top >= 1")


def pick_near_best(gains: Sequence[float], rng: np.random.Generator, policy: NearBest) -> int:
    """The index of the draft to commit, drawn uniformly among the near-best (`NearBest`).

    `gains` come in the caller's order of preference, which breaks ties among equal gains (e.g. training score,
    then the order drafts were drawn in). When no draft gains, the first best is returned without drawing: a
    proposal that cannot improve stays exactly what it was. Raises ValueError on an empty sequence."""
    if not gains:
        raise ValueError("no drafts to pick from")
    order = sorted(range(len(gains)), key=lambda i: -gains[i])  # stable: equal gains keep the caller's order
    best = gains[order[0]]
    if not best > 0:
        return order[0]
    floor = best - max(policy.relative * best, policy.absolute)
    near = [i for i in order[: policy.top] if gains[i] >= floor]
    return near[int(rng.integers(len(near)))] if len(near) > 1 else near[0]


__all__ = ["NearBest", "pick_near_best"]
