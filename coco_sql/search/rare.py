"""Rare-capability carrier selection (CoCoEvolve Appendix C.5.1), mixed with a base parent policy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coco_sql.search.population import ParentPolicy, Population, draw
from coco_sql.search.roster import DEFAULT_THETA, LpRosterPolicy


@dataclass(frozen=True, eq=False)
class RareTerms:
    """The intermediate quantities of Appendix C.5.1, for inspection and tests (arrays indexed like the input)."""

    rho: np.ndarray  # per row: population solve rate
    h: np.ndarray  # per row: rarity weight
    mass: np.ndarray  # per program: H(p)
    mass_norm: np.ndarray  # per program: H~(p) = H(p) / max_q H(q)
    fitness_norm: np.ndarray  # per program: Phi~(p)
    q_rare: np.ndarray  # per program


def rare_terms(
    scores: np.ndarray,
    fitness: np.ndarray | None = None,
    *,
    theta: float = DEFAULT_THETA,
    gamma: float = 2.0,
    beta: float = 5.0,
    lam: float = 0.5,
    p_exp: float = 2.0,
) -> RareTerms:
    """q_rare of Appendix C.5.1 over a population `scores` (programs x rows); `fitness` defaults to row means.

        I(p)    = {i : s_i(p) >= theta}
        rho_i   = (1/|A|) sum_{p in A} I[i in I(p)]                 population solve rate of row i
        h_i     = (1 - rho_i)^gamma                                  rarity weight, gamma > 0
        H(p)    = sum_{i=1..N} h_i I[i in I(p)]                      hard-capability mass
        q_rare(p) ∝ exp(beta * (lam * Phi~(p) + (1 - lam) * H~(p)^p_exp))

    Deviation, stated: the paper uses H(p)^p unnormalised; with N rows H can reach N and H^p overflows exp, so we
    use H~(p) = H(p) / max_q H(q) in [0, 1] (H~ = 0 for all when max H = 0). Phi~ is fitness min-max normalised
    over the population, Phi~(p) = (f(p) - min f) / (max f - min f), and 0 for all when every fitness is equal.
    The softmax is computed with its maximum exponent subtracted (same distribution, no overflow).
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or scores.shape[0] == 0:
        raise ValueError("rare-capability selection needs a non-empty (programs x rows) score matrix")
    if not gamma > 0:
        raise ValueError("gamma must be > 0")
    if not 0.0 <= lam <= 1.0:
        raise ValueError("lam must be in [0, 1]")
    n_programs, n_rows = scores.shape
    f = (scores.mean(axis=1) if n_rows else np.zeros(n_programs)) if fitness is None else np.asarray(fitness)
    solved = (scores >= theta).astype(float)
    rho = solved.mean(axis=0)
    h = (1.0 - rho) ** gamma
    mass = solved @ h
    top = float(mass.max()) if mass.size else 0.0
    mass_norm = mass / top if top > 0 else np.zeros(n_programs)
    spread = float(f.max() - f.min())
    fitness_norm = (f - f.min()) / spread if spread > 0 else np.zeros(n_programs)
    exponent = beta * (lam * fitness_norm + (1.0 - lam) * mass_norm**p_exp)
    weights = np.exp(exponent - exponent.max())
    return RareTerms(rho, h, mass, mass_norm, fitness_norm, weights / weights.sum())


class RareCapabilityPolicy:
    """Rare-capability carrier selection mixed with a base policy (Appendix C.5.1):

        q(p) = (1 - eps) * q_rare(p) + eps * q_base(p)

    with q_rare from `rare_terms` over the whole population and q_base = `base.probabilities(population)` (default
    base: `LpRosterPolicy()`). Defaults gamma = 2, beta = 5, lam = 0.5, p_exp = 2, eps = 0.2, theta = 0.9.
    """

    name = "rare_capability"

    def __init__(
        self,
        base: ParentPolicy | None = None,
        *,
        theta: float = DEFAULT_THETA,
        gamma: float = 2.0,
        beta: float = 5.0,
        lam: float = 0.5,
        p_exp: float = 2.0,
        eps: float = 0.2,
    ) -> None:
        if not 0.0 <= eps <= 1.0:
            raise ValueError("eps must be in [0, 1]")
        if not gamma > 0:
            raise ValueError("gamma must be > 0")
        if not 0.0 <= lam <= 1.0:
            raise ValueError("lam must be in [0, 1]")
        self.base: ParentPolicy = base if base is not None else LpRosterPolicy(theta=theta)
        self.theta = theta
        self.gamma = gamma
        self.beta = beta
        self.lam = lam
        self.p_exp = p_exp
        self.eps = eps

    def terms(self, population: Population) -> RareTerms:
        return rare_terms(
            population.scores,
            population.fitness,
            theta=self.theta,
            gamma=self.gamma,
            beta=self.beta,
            lam=self.lam,
            p_exp=self.p_exp,
        )

    def probabilities(self, population: Population) -> np.ndarray:
        q_rare = self.terms(population).q_rare
        q_base = self.base.probabilities(population)
        return (1.0 - self.eps) * q_rare + self.eps * q_base

    def select(self, population: Population, rng: np.random.Generator) -> str:
        return draw(population, self.probabilities(population), rng)
