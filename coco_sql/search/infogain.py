"""Which failing training row the next mutation should target (CoCoEvolve Section 2.3 and Appendix C.3).

InfoGain targeting. With a task-similarity kernel kappa on the training rows V:

    s^(p, t)  = sum_{t' in tested(p)} kappa(t, t')^4 s(p, t') / sum_{t' in tested(p)} kappa(t, t')^4
                (Nadaraya-Watson surrogate with kappa^4, Appendix C.3)
    s^(p, t)  <- min(s^, 0.7) for rows p was not tested on; max(s^, 0.1) for observed failures
    delta(t)  = 1 if any archive program solves t, else (1/2)^c(t)     (c: times t was targeted without a solve)
    gain(t)   = (1 - s^(p, t)) * delta(t) * mean_{t' in V} kappa(t, t')
    P(t)      = softmax(gain / 0.1) over rows the parent does not solve (s(p, t) < 0.9)

The paper writes the transfer term as sum_{t'} kappa(t, t'); we use the mean so that gains lie in [0, 1] and the
softmax temperature 0.1 means the same thing for any pool size.

Until the embedded model provides embeddings, kappa is a deterministic text similarity: the cosine of the
character 3-gram count vectors of each row's input text, which lies in [0, 1].
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

SOLVED = 0.9
UNTESTED_CAP = 0.7
FAILURE_FLOOR = 0.1
TEMPERATURE = 0.1


def text_kernel(texts: Sequence[str], n: int = 3) -> np.ndarray:
    """kappa[i, j]: cosine similarity of character n-gram counts (padded), in [0, 1], with kappa[i, i] = 1."""
    grams = [Counter(f" {t} "[i : i + n] for i in range(max(1, len(t) + 3 - n))) for t in texts]
    vocabulary = {g: k for k, g in enumerate(sorted({g for c in grams for g in c}))}
    matrix = np.zeros((len(texts), len(vocabulary)))
    for row, counts in enumerate(grams):
        for gram, count in counts.items():
            matrix[row, vocabulary[gram]] = count
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms == 0, 1.0, norms)
    kappa = np.clip(unit @ unit.T, 0.0, 1.0)
    np.fill_diagonal(kappa, 1.0)
    return kappa


@dataclass(frozen=True)
class TargetingContext:
    """What a target picker sees, all on the TRAINING rows (`ids` order)."""

    ids: tuple[str, ...]
    parent_scores: np.ndarray  # s(p, t); NaN where the parent was not tested
    solved_anywhere: np.ndarray  # bool: some archive program solves t
    failed_targets: Mapping[str, int] = field(default_factory=dict)  # c(t)


class TargetPicker(Protocol):
    name: str

    def order(self, context: TargetingContext, rng: np.random.Generator) -> list[str]:
        """Candidate targets, most wanted first (rows the parent solves are excluded)."""
        ...


class UniformTargets:
    """Uniform over the rows the parent does not solve (the parent-local baseline)."""

    name = "uniform"

    def order(self, context: TargetingContext, rng: np.random.Generator) -> list[str]:
        open_rows = [i for i, s in zip(context.ids, context.parent_scores, strict=True) if not s >= SOLVED]
        return [open_rows[int(k)] for k in rng.permutation(len(open_rows))]


class InfoGainTargets:
    """InfoGain targeting (Section 2.3, Appendix C.3); see the module docstring for the formulas."""

    name = "infogain"

    def __init__(self, kappa: np.ndarray, temperature: float = TEMPERATURE) -> None:
        if kappa.ndim != 2 or kappa.shape[0] != kappa.shape[1]:
            raise ValueError("kappa must be a square matrix over the training rows")
        self.kappa = kappa
        self.temperature = temperature

    def surrogate(self, scores: np.ndarray) -> np.ndarray:
        """s^(p, t) with kappa^4 weights over tested rows, the 0.7 cap and the 0.1 failure floor."""
        tested = ~np.isnan(scores)
        if not tested.any():
            return np.full(scores.shape, UNTESTED_CAP)
        weights = self.kappa[:, tested] ** 4
        totals = weights.sum(axis=1)
        estimate = np.where(totals > 0, weights @ scores[tested] / np.where(totals > 0, totals, 1.0), 0.0)
        estimate = np.where(tested, estimate, np.minimum(estimate, UNTESTED_CAP))
        failed = tested & (np.nan_to_num(scores, nan=1.0) < SOLVED)
        return np.where(failed, np.maximum(estimate, FAILURE_FLOOR), estimate)

    def decay(self, context: TargetingContext) -> np.ndarray:
        """delta(t) = 1 if solved anywhere in the archive, else (1/2)^c(t)."""
        counts = np.array([context.failed_targets.get(i, 0) for i in context.ids], dtype=float)
        return np.where(context.solved_anywhere, 1.0, 0.5**counts)

    def gains(self, context: TargetingContext) -> np.ndarray:
        transfer = self.kappa.mean(axis=1)
        return (1.0 - self.surrogate(context.parent_scores)) * self.decay(context) * transfer

    def probabilities(self, context: TargetingContext) -> np.ndarray:
        """Softmax of gain / T over rows the parent does not solve; 0 elsewhere."""
        gains = self.gains(context)
        eligible = ~(context.parent_scores >= SOLVED)
        if not eligible.any():
            return np.zeros(len(gains))
        logits = np.where(eligible, gains / self.temperature, -np.inf)
        weights = np.exp(logits - logits[eligible].max())
        return weights / weights.sum()

    def order(self, context: TargetingContext, rng: np.random.Generator) -> list[str]:
        """Targets drawn without replacement from the softmax distribution."""
        probabilities = self.probabilities(context)
        eligible = int((probabilities > 0).sum())
        if eligible == 0:
            return []
        picks = rng.choice(len(probabilities), size=eligible, replace=False, p=probabilities)
        return [context.ids[int(k)] for k in picks]
