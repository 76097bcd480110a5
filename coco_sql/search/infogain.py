"""Which failing training row the next mutation should target (CoCoEvolve Section 2.3 and Appendix C.3).

InfoGain targeting. With a task-similarity kernel kappa on the training rows V, and N(t) the k nearest rows of t
(t itself included, kappa(t, t) = 1; k = 32 by default; see `coco_sql.search.neighbours`):

    s^(p, t)  = sum_{t' in N(t) ∩ tested(p)} kappa(t, t')^4 s(p, t') / sum_{t' in N(t) ∩ tested(p)} kappa(t, t')^4
                (Nadaraya-Watson surrogate with kappa^4, Appendix C.3; 0 if no row of N(t) was tested)
    s^(p, t)  <- min(s^, 0.7) for rows p was not tested on; max(s^, 0.1) for observed failures
    delta(t)  = 1 if any archive program solves t, else (1/2)^c(t)     (c: times t was targeted without a solve)
    gain(t)   = (1 - s^(p, t)) * delta(t) * mean_{t' in V} kappa(t, t')
    P(t)      = softmax(gain / 0.1) over rows the parent does not solve (s(p, t) < 0.9)

The paper sums the surrogate over all tested rows; we restrict it to N(t), so that a run keeps O(|V|·k) numbers
instead of a |V|×|V| matrix (40-60 GB at 50,000 rows, issue 12). What this drops are the rows outside the k
nearest, whose kappa^4 weights are the smallest; with all of a row's k nearest untested, s^ is 0, as it was
before for a row with no similar tested row at all. The transfer term is NOT restricted: kappa is a cosine of
vectors with no negative entry, so mean_{t' in V} kappa(t, t') = X[t] · mean_{t'} X[t'] is exact in O(|V|)
(`Neighbours.mean_kappa`). Restricting it instead (the mean of kappa over N(t)) would change the target
distribution far more than the surrogate's restriction does: on goemotions' training rows, total-variation
distance 0.10-0.22 from the dense kernel's distribution against at most 0.02 (`bench/bench_infogain.py`).

The paper writes the transfer term as sum_{t'} kappa(t, t'); we use the mean so that gains lie in [0, 1]
(s^, delta and the mean each lie in [0, 1], for scores in [0, 1]) and the softmax temperature 0.1 means the
same thing for any pool size. When the pool has at most k + 1 rows, N(t) is all of V and every formula is the
dense one exactly.

Until the embedded model provides embeddings, kappa is a deterministic text similarity: the cosine of the
character 3-gram count vectors of each row's input text, which lies in [0, 1].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from coco_sql.search.neighbours import K, Neighbours, build_neighbours

SOLVED = 0.9
UNTESTED_CAP = 0.7
FAILURE_FLOOR = 0.1
TEMPERATURE = 0.1
CHUNK_ROWS = 1 << 16  # rows per block of the surrogate: bounds its temporaries at any pool size


@dataclass(frozen=True)
class TargetingContext:
    """What a target picker sees, all on the TRAINING rows (`ids` order)."""

    ids: tuple[str, ...]
    parent_scores: np.ndarray  # s(p, t); NaN where the parent was not tested
    solved_anywhere: np.ndarray  # bool: some archive program solves t
    failed_targets: Mapping[str, int] = field(default_factory=dict)  # c(t)


class TargetPicker(Protocol):
    name: str

    def order(
        self, context: TargetingContext, rng: np.random.Generator, limit: int | None = None
    ) -> list[str]:
        """Candidate targets, most wanted first (rows the parent solves are excluded); the first `limit` of them
        when given (the same rows as the first `limit` of the whole order)."""
        ...


class UniformTargets:
    """Uniform over the rows the parent does not solve (the parent-local baseline)."""

    name = "uniform"

    def order(
        self, context: TargetingContext, rng: np.random.Generator, limit: int | None = None
    ) -> list[str]:
        open_rows = [i for i, s in zip(context.ids, context.parent_scores, strict=True) if not s >= SOLVED]
        return [open_rows[int(k)] for k in rng.permutation(len(open_rows))[:limit]]


class InfoGainTargets:
    """InfoGain targeting (Section 2.3, Appendix C.3); see the module docstring for the formulas."""

    name = "infogain"

    def __init__(self, neighbours: Neighbours, temperature: float = TEMPERATURE) -> None:
        self.neighbours = neighbours
        self.temperature = temperature
        self.transfer = neighbours.mean_kappa  # mean_{t' in V} kappa(t, t'), exact

    @classmethod
    def from_texts(cls, texts: Sequence[str], k: int = K) -> InfoGainTargets:
        """kappa: the 3-gram cosine of the training rows' input texts (k nearest rows each, and the mean)."""
        return cls(build_neighbours(texts, k))

    def surrogate(self, scores: np.ndarray) -> np.ndarray:
        """s^(p, t) with kappa^4 weights over the tested rows of N(t), the 0.7 cap and the 0.1 floor."""
        if len(scores) != len(self.neighbours):
            raise ValueError(f"{len(scores)} scores for {len(self.neighbours)} training rows")
        tested = ~np.isnan(scores)
        if not tested.any():
            return np.full(scores.shape, UNTESTED_CAP)
        estimate = np.zeros(len(scores))
        for start in range(0, len(scores), CHUNK_ROWS):
            stop = min(len(scores), start + CHUNK_ROWS)
            near = scores[self.neighbours.index[start:stop]]  # s(p, t') for t' in N(t); NaN if untested
            untested = np.isnan(near)
            weights = self.neighbours.weight[start:stop].astype(np.float64)
            weights *= weights
            weights *= weights  # kappa^4
            weights[untested] = 0.0
            near[untested] = 0.0
            totals = weights.sum(axis=1)
            weighted = np.einsum("ij,ij->i", weights, near)
            np.divide(weighted, totals, out=estimate[start:stop], where=totals > 0)  # 0 without a tested row
        estimate = np.where(tested, estimate, np.minimum(estimate, UNTESTED_CAP))
        failed = tested & (np.nan_to_num(scores, nan=1.0) < SOLVED)
        return np.where(failed, np.maximum(estimate, FAILURE_FLOOR), estimate)

    def decay(self, context: TargetingContext) -> np.ndarray:
        """delta(t) = 1 if solved anywhere in the archive, else (1/2)^c(t)."""
        counts = np.array([context.failed_targets.get(i, 0) for i in context.ids], dtype=float)
        return np.where(context.solved_anywhere, 1.0, 0.5**counts)

    def gains(self, context: TargetingContext) -> np.ndarray:
        return (1.0 - self.surrogate(context.parent_scores)) * self.decay(context) * self.transfer

    def probabilities(self, context: TargetingContext) -> np.ndarray:
        """Softmax of gain / T over rows the parent does not solve; 0 elsewhere."""
        gains = self.gains(context)
        eligible = ~(context.parent_scores >= SOLVED)
        if not eligible.any():
            return np.zeros(len(gains))
        logits = np.where(eligible, gains / self.temperature, -np.inf)
        weights = np.exp(logits - logits[eligible].max())
        return weights / weights.sum()

    def order(
        self, context: TargetingContext, rng: np.random.Generator, limit: int | None = None
    ) -> list[str]:
        """Targets drawn without replacement from the softmax distribution."""
        probabilities = self.probabilities(context)
        eligible = int((probabilities > 0).sum())
        if eligible == 0:
            return []
        picks = _leading_draws(probabilities, eligible, limit, rng)
        if picks is None:
            picks = rng.choice(len(probabilities), size=eligible, replace=False, p=probabilities)[:limit]
        return [context.ids[int(k)] for k in picks]


def _leading_draws(
    p: np.ndarray, size: int, limit: int | None, rng: np.random.Generator
) -> np.ndarray | None:
    """The first `limit` picks of `rng.choice(len(p), size, replace=False, p=p)`, drawing exactly what it draws.

    numpy draws `size` uniforms, maps them through the CDF and keeps the distinct rows in the order they first
    appear; only when that round has fewer than `size` distinct rows does it zero them and draw again. Its
    first `limit` picks are therefore fixed by the first round whenever that round has `limit` distinct rows,
    and this function computes just that round: O(rows) instead of repeated rounds over every eligible row
    (~1 s and 400 MB at 200,000 rows), with the same RNG consumption, so runs keep their draws. None when the
    first round is too short (a very peaked p), with `rng` left as it was, and the caller draws in full.
    """
    if limit is None or limit >= size:
        return None
    before = rng.bit_generator.state
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    new = cdf.searchsorted(rng.random(size), side="right")
    _, first = np.unique(new, return_index=True)
    if len(first) < limit:
        rng.bit_generator.state = before
        return None
    first.sort()
    return new[first[:limit]]
