"""The champion: the program of a run a person would deploy. ONE rule (`choose`), used by the loop (`RunState`)
and by everything that reads a run from its tables (`champion_of`: `status`, exports, `cost`, the report), so
that they all name the same program.

The candidates are the run's valid programs evaluated on every validation row, less the children over its
`max_cost` (`engine.deploy_cost`). Each has a validation score s (the mean of its per-row scores), an iteration
t, and a deploy cost c per 1,000 rows, all in one unit (`deploy_cost.cost_measure`: the run's `max_cost` unit,
else dollars when the run prices every model that spent tokens, else tokens when any were spent, else calls; a
program without AI calls costs 0). With b's per-row validation scores x_1..x_n:

    best b     = argmax_p s_p, ties to the earliest iteration                   (Algorithm 1, line 11)
    SE         = sd(x_1..x_n; ddof = 1) / sqrt(n)                               (0 when n < 2)
    near       = { p : s_p >= s_b - SE }                                        (b is always in it)
    champion   = argmin over p in near of (c_p, -s_p, t_p)    rule 'cheapest_within_se', the default
               = b                                            rule 'best', the unconstrained best

Why: this is the one-standard-error rule of CART (Breiman et al. 1984, section 3.4.3) with deploy cost in place
of tree size. A program the validation rows cannot tell from the best (it scores within one standard error of
the best's mean) is as good as the best on what we know, and a deployed pipeline pays its cost on every row,
so the cheapest such program is the one to deploy (issue 26: a proxy one validation row below the best, at
1/134 of its cost, lost to the best under the old argmax).

Ties and edge cases: among programs that cost the same, the higher validation score wins, then the earliest.
Costs are compared to 9 significant digits, so the loop's figures (from an evaluation's usage) and the store's
(from its rows) make the same choice. When every candidate costs the same, as in a task without AI functions
(all cost 0), the champion is the best program, exactly as under 'best'. SE is taken over b's scores sorted, so
it is the same number whichever order a store returns the rows in. `--target` compares the best's score, not
the champion's: it says when the search has found what it looks for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from coco_sql.engine.deploy_cost import (
    CALLS,
    DeployCost,
    Prices,
    cost_measure,
    parse_max_cost,
    program_costs,
    show_cost,
)
from coco_sql.engine.spend import normalise_prices
from coco_sql.errors import ConfigError
from coco_sql.store import Warehouse
from coco_sql.store.records import DEPLOY_COST_EVENT

CHEAPEST_WITHIN_SE, BEST = "cheapest_within_se", "best"
RULES = (CHEAPEST_WITHIN_SE, BEST)
DEFAULT_RULE = CHEAPEST_WITHIN_SE
RULE_TEXT = {
    CHEAPEST_WITHIN_SE: "the cheapest program to deploy whose validation score is within one standard error of "
    "the best's",
    BEST: "the program with the best validation score (the earliest of equals), whatever it costs",
}
"""Each rule in one sentence, for the report, `status` and the README."""


@dataclass(frozen=True)
class Candidate:
    """A program that may be champion: its validation score, iteration and deploy cost per 1,000 rows."""

    program_id: str
    iteration: int
    val_score: float
    cost: float = 0.0


@dataclass(frozen=True)
class Choice:
    """What the rule chose: the `champion`, the unconstrained `best`, the best's `standard_error`, the `rule`
    and the unit of the costs (`measure`)."""

    champion: Candidate
    best: Candidate
    standard_error: float
    rule: str
    measure: str = CALLS

    @property
    def differs(self) -> bool:
        """True when the champion is not the best program."""
        return self.champion.program_id != self.best.program_id

    def describe(self) -> str:
        """The rule and what it did, in one sentence for people."""
        if self.rule == BEST:
            return f"champion {self.champion.program_id}: {RULE_TEXT[BEST]}"
        line = (
            f"champion {self.champion.program_id}: {RULE_TEXT[CHEAPEST_WITHIN_SE]} "
            f"({self.best.val_score:.4f} - {self.standard_error:.4f} = "
            f"{self.best.val_score - self.standard_error:.4f})"
        )
        if not self.differs:
            return line + "; it is the best program"
        share = f"{self.champion.cost / self.best.cost:.1%}" if self.best.cost > 0 else "none"
        return (
            f"{line}; the best, {self.best.program_id}, scores {self.best.val_score:.4f} at "
            f"{show_cost(self.best.cost, self.measure)} per 1,000 rows, the champion {self.champion.val_score:.4f} "
            f"at {show_cost(self.champion.cost, self.measure)} ({share} of it)"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "measure": self.measure,
            "standard_error": self.standard_error,
            "champion": vars(self.champion),
            "best": vars(self.best),
        }


def standard_error(scores: Sequence[float] | np.ndarray) -> float:
    """sd(scores; ddof = 1) / sqrt(n) over the scores in sorted order; 0 for fewer than two."""
    values = np.sort(np.asarray(scores, dtype=float))
    if values.size < 2:
        return 0.0
    return float(values.std(ddof=1) / math.sqrt(values.size))


def choose(
    candidates: Iterable[Candidate],
    rows_of: Callable[[str], Sequence[float] | np.ndarray],
    rule: str = DEFAULT_RULE,
    measure: str = CALLS,
) -> Choice | None:
    """The champion of `candidates` by `rule` (module docstring); `rows_of(program_id)` gives a program's
    per-row validation scores (asked for the best program only). None without candidates."""
    if rule not in RULES:
        raise ConfigError(f"the champion rule is one of {', '.join(RULES)} (got {rule!r})")
    pool = list(candidates)
    if not pool:
        return None
    best = min(pool, key=lambda c: (-c.val_score, c.iteration, c.program_id))
    se = standard_error(rows_of(best.program_id))
    if rule == BEST:
        return Choice(best, best, se, rule, measure)
    floor = best.val_score - se
    near = [c for c in pool if c.val_score >= floor]
    champion = min(near, key=lambda c: (_cost_key(c.cost), -c.val_score, c.iteration, c.program_id))
    return Choice(champion, best, se, rule, measure)


def champion_of(store: Warehouse, run_id: int, rule: str | None = None) -> Choice | None:
    """Run `run_id`'s champion as its tables hold it, by `rule` (default: the run's option `champion`); None
    when the run has no valid program evaluated on every validation row."""
    config = store.get_run(run_id).config
    programs = program_costs(store, run_id)
    over = {e.program_id for e in store.events(run_id, DEPLOY_COST_EVENT) if e.payload.get("within") is False}
    prices = normalise_prices(config.get("prices"))
    limit = config.get("max_cost")
    measure = cost_measure(
        (p["deploy_cost"] for p in programs), prices, None if limit is None else parse_max_cost(limit).unit
    )
    candidates = [
        Candidate(p["program_id"], p["iteration"], p["val_score"], amount(p["deploy_cost"], measure, prices))
        for p in programs
        if p["program_id"] not in over
    ]

    def rows_of(program_id: str) -> list[float]:
        return list(store.row_scores(run_id, "val", program_id).get(program_id, {}).values())

    return choose(candidates, rows_of, rule or config.get("champion") or DEFAULT_RULE, measure)


def amount(cost: DeployCost, measure: str, prices: Prices) -> float:
    """A `DeployCost` in `measure`; infinite when it cannot be priced (never cheapest)."""
    value = cost.amount(measure, prices)
    return math.inf if value is None else float(value)


def _cost_key(cost: float) -> float:
    return float(f"{cost:.9g}")
