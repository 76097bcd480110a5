"""Which primitive the next operator exposes: Thompson sampling over Beta posteriors (PACE, "Adaptive EAP
Selection"; Daniel et al. 2018).

Each use of a focus primitive is one Bernoulli observation: did the child improve on its fixed parent
(`child_score > parent_score`)? With a uniform prior, after s improvements and f non-improvements the posterior
of primitive e is

    theta_e ~ Beta(1 + s_e, 1 + f_e)

and selection draws one theta per primitive and exposes the largest. Only VERIFIED trials count: "Candidates
failing to satisfy their assigned structural contracts are immediately discarded from the Thompson sampling
update" ("Primitive-Aware Operators"), so a contract violation changes no posterior. A child that failed to run
under a verified contract is a non-improvement. The RNG is passed in (one of the run's streams) and draws happen
in a fixed order (sorted names), so a resumed run draws what the uninterrupted one would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from coco_sql.primitives.library import PrimitiveLibrary, PrimitiveTrial


@dataclass(frozen=True)
class Posterior:
    """Beta(alpha, beta) over the chance that a trial focused on the primitive improves its child."""

    alpha: float = 1.0
    beta: float = 1.0

    @property
    def mean(self) -> float:
        """alpha / (alpha + beta): the posterior mean the CLI shows."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def trials(self) -> int:
        """The verified trials behind it (the prior's pseudo-counts removed)."""
        return round(self.alpha + self.beta - 2)


def posteriors(library: PrimitiveLibrary, trials: Iterable[PrimitiveTrial]) -> dict[str, Posterior]:
    """name -> Beta(1 + improved, 1 + not improved) over the verified trials that focused on it, for every
    primitive of `library` (Beta(1, 1) for one never tried). Trials of names outside the library are ignored."""
    counts = {name: [0, 0] for name in library.names()}
    for trial in trials:
        if not trial.verified or trial.focus not in counts:
            continue
        counts[trial.focus][0 if trial.improved else 1] += 1
    return {name: Posterior(1.0 + s, 1.0 + f) for name, (s, f) in counts.items()}


def posterior_mean(posterior: Posterior) -> float:
    return posterior.mean


def thompson_pick(
    names: Iterable[str],
    posteriors: Mapping[str, Posterior],
    rng: np.random.Generator,
    n: int = 1,
    exclude: Iterable[str] = (),
) -> list[str]:
    """The `n` names with the highest posterior draws, best first. One Beta draw per candidate from `rng`, in
    sorted-name order (so the result depends on the candidates and the RNG state only); a name without a
    posterior draws from the prior Beta(1, 1); `exclude`d names are not candidates and draw nothing."""
    skip = set(exclude)
    candidates = sorted({name for name in names if name not in skip})
    if not candidates or n <= 0:
        return []
    prior = Posterior()
    alphas = np.array([posteriors.get(name, prior).alpha for name in candidates])
    betas = np.array([posteriors.get(name, prior).beta for name in candidates])
    draws = rng.beta(alphas, betas)
    order = sorted(range(len(candidates)), key=lambda i: (-draws[i], i))
    return [candidates[i] for i in order[:n]]
