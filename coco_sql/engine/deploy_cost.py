"""A program's deploy cost per 1,000 rows (`DeployCost`), and the run's limit on it (`max_cost`, `CostLimit`).

A deployed pipeline runs on every row without the search's response cache, so its cost counts every call the
program made, cache hits included. It is estimated from the program's evaluation on the validation split (the
`ai_usage` rows of split 'val', or the evaluation's `Usage`), over the n rows that evaluation ran on:

    calls_per_1000          = 1000 * sum(calls) / n          calls: rows answered, from a provider or the cache
    input_tokens_per_1000   = 1000 * sum(input_tokens + cached_input_tokens) / n
    output_tokens_per_1000  = 1000 * sum(output_tokens + cached_output_tokens) / n
    usd_per_1000            = sum over models m of (input_tokens_per_1000(m) * in_price(m)
                                                    + output_tokens_per_1000(m) * out_price(m)) / 1e6

with prices in USD per 1M tokens (`RunConfig.prices`). Dollars need an explicit price for every model that spent
tokens, the embedded ones included: deployed, their calls are the warehouse's AI functions, which cost money.
Without one, `usd` is None. A program without AI calls costs 0. The view `deploy_costs` (sql/views.sql) is the
same estimate in SQL for every stored program; the loop computes it here from a child's validation outcome, with
the same arithmetic, so both give the same numbers.

A limit is per 1,000 rows, in one of three units:

    '500 calls'                        calls_per_1000
    '20000 tokens', 20000              input_tokens_per_1000 + output_tokens_per_1000
    '$0.05', '0.05 usd'                usd_per_1000

Under a limit, every child gets a `deploy_cost` event (its cost, the limit, `within`). A child over the limit,
or one whose dollar cost cannot be priced, is evaluated and recorded, but never admitted to the archive and never
champion (`engine.champion` skips it); the seed always stands. A dollar limit needs a price
for each model the task's AI functions are configured to call: a one-line ConfigError before anything is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coco_sql.errors import ConfigError
from coco_sql.store import Event, Warehouse
from coco_sql.store.records import DEPLOY_COST_EVENT, DeployUsage

if TYPE_CHECKING:
    from coco_sql.evaluate import Outcome
    from coco_sql.llm.usage import Usage

CALLS, TOKENS, USD = "calls", "tokens", "usd"
Prices = Mapping[str, tuple[float, float]]

_NUMBER = r"(\d[\d,_]*(?:\.\d+)?|\.\d+)"
_CALLS = re.compile(rf"{_NUMBER}\s*calls?", re.IGNORECASE)
_TOKENS = re.compile(rf"{_NUMBER}(?:\s*tokens?)?", re.IGNORECASE)
_DOLLARS = re.compile(rf"\$\s*{_NUMBER}|{_NUMBER}\s*(?:usd|\$)", re.IGNORECASE)
_FORMS = "calls ('500 calls'), tokens ('20000 tokens' or 20000) or US dollars ('$0.05' or '0.05 usd') per 1,000 rows"


@dataclass(frozen=True)
class CostLimit:
    """A parsed `max_cost`: at most `amount` `unit` (calls | tokens | usd) per 1,000 rows."""

    amount: float
    unit: str

    def show(self, amount: float) -> str:
        """`amount` in this limit's unit, for people: '2,167 calls', '20,000 tokens', '$0.0012'."""
        return show_cost(amount, self.unit)

    def __str__(self) -> str:
        return self.show(self.amount)


def parse_max_cost(value: object) -> CostLimit:
    """`value` as a limit (module docstring); a one-line ConfigError naming the accepted forms otherwise."""
    amount: float | None = None
    unit = TOKENS
    if isinstance(value, int | float) and not isinstance(value, bool):
        amount = float(value)
    elif isinstance(value, str):
        text = value.strip()
        for pattern, kind in ((_CALLS, CALLS), (_TOKENS, TOKENS), (_DOLLARS, USD)):
            if match := pattern.fullmatch(text):
                number = next(g for g in match.groups() if g is not None)
                amount, unit = float(number.replace(",", "").replace("_", "")), kind
                break
    if amount is None or not math.isfinite(amount) or amount < 0:
        raise ConfigError(f"max_cost (--max-cost) must be {_FORMS}, got {value!r}")
    return CostLimit(amount, unit)


def show_cost(amount: float, unit: str) -> str:
    """A cost per 1,000 rows in `unit`, for people."""
    if unit == USD:
        return "$" + (f"{amount:,.6f}".rstrip("0").rstrip(".") or "0")
    whole = abs(amount) >= 10  # calls and tokens are counts: whole ones, but for a fraction of ten
    return (f"{amount:,.0f}" if whole else f"{amount:,.1f}".removesuffix(".0")) + f" {unit}"


@dataclass(frozen=True)
class DeployCost:
    """What a program costs per 1,000 rows deployed (module docstring): `calls`, `input_tokens` and
    `output_tokens` per 1,000 rows, and the tokens per model as (model, input, output), by model name."""

    rows: int
    calls: float
    input_tokens: float
    output_tokens: float
    models: tuple[tuple[str, float, float], ...] = ()

    @classmethod
    def per_1000(cls, rows: int, calls: int, models: Mapping[str, tuple[int, int]]) -> DeployCost:
        """From totals over `rows` rows: `calls`, and (input, output) tokens per model, cached ones included."""
        if rows <= 0:
            return cls(0, 0.0, 0.0, 0.0)
        total_in = sum(i for i, _ in models.values())
        total_out = sum(o for _, o in models.values())
        return cls(
            rows,
            calls * 1000 / rows,
            total_in * 1000 / rows,
            total_out * 1000 / rows,
            tuple((m, i * 1000 / rows, o * 1000 / rows) for m, (i, o) in sorted(models.items())),
        )

    @classmethod
    def of(cls, used: DeployUsage) -> DeployCost:
        """From a program's stored validation totals (`Warehouse.deploy_usage`)."""
        return cls.per_1000(used.rows, used.calls, {m: (i, o) for m, i, o in used.models})

    @classmethod
    def from_usage(cls, usage: Usage | None, rows: int) -> DeployCost:
        """From one evaluation's `Usage` over `rows` rows (None: the program made no AI call)."""
        calls, models = 0, {}
        for (_, model), line in (usage.lines if usage else {}).items():
            calls += line.calls
            spent_in, spent_out = models.get(model, (0, 0))
            models[model] = (
                spent_in + line.input_tokens + line.cached_input_tokens,
                spent_out + line.output_tokens + line.cached_output_tokens,
            )
        return cls.per_1000(rows, calls, models)

    @property
    def tokens(self) -> float:
        """Input plus output tokens per 1,000 rows."""
        return self.input_tokens + self.output_tokens

    def usd(self, prices: Prices) -> float | None:
        """US dollars per 1,000 rows at `prices`; None when a model that spent tokens has no price."""
        total = 0.0
        for model, spent_in, spent_out in self.models:
            if spent_in + spent_out == 0:
                continue
            if model not in prices:
                return None
            price_in, price_out = prices[model]
            total += (spent_in * price_in + spent_out * price_out) / 1e6
        return total

    def unpriced(self, prices: Prices) -> list[str]:
        """The models that spent tokens and have no price."""
        return [m for m, i, o in self.models if i + o > 0 and m not in prices]

    def amount(self, unit: str, prices: Prices) -> float | None:
        """The cost in `unit` (calls | tokens | usd); None for dollars that cannot be priced."""
        if unit == CALLS:
            return self.calls
        return self.tokens if unit == TOKENS else self.usd(prices)

    def as_dict(self, prices: Prices) -> dict[str, Any]:
        """The per-1,000-rows figures, JSON-able (`usd_per_1000` None without prices)."""
        return {
            "rows": self.rows,
            "calls_per_1000": self.calls,
            "input_tokens_per_1000": self.input_tokens,
            "output_tokens_per_1000": self.output_tokens,
            "usd_per_1000": self.usd(prices),
        }


def program_costs(store: Warehouse, run_id: int) -> list[dict[str, Any]]:
    """The valid programs of run `run_id` evaluated on every validation row, by iteration: program_id,
    iteration, val_score, n_rows and `deploy_cost`, their `DeployCost` per 1,000 rows (cache hits counted) from
    `Warehouse.deploy_usage`, as the view `deploy_costs` computes it. A child a minibatch gate stopped (fewer
    validation rows than the others) is left out, as it is from admission and the champion."""
    scores = store.program_scores(run_id, "val")
    usage = store.deploy_usage(run_id)
    full = max((score.n_rows for score in scores.values()), default=0)
    programs = []
    for program in store.programs(run_id):
        score = scores.get(program.program_id)
        if not program.valid or score is None or score.n_rows != full or full == 0:
            continue
        cost = DeployCost.of(usage.get(program.program_id) or DeployUsage(program.program_id, score.n_rows))
        programs.append(
            {
                "program_id": program.program_id,
                "iteration": program.iteration,
                "val_score": score.score,
                "n_rows": score.n_rows,
                "deploy_cost": cost,
            }
        )
    return programs


def cost_measure(costs: Iterable[DeployCost], prices: Prices, unit: str | None = None) -> str:
    """The unit a run's programs are compared in (the score/cost frontier, the champion): the run's `max_cost`
    `unit` if it has one (and, for dollars, can price every program); else usd when `prices` cover every model
    that spent tokens (and some did), else tokens when any were spent, else calls."""
    costs = list(costs)
    priced = all(not c.unpriced(prices) for c in costs)
    if unit is not None and (unit != USD or priced):
        return unit
    if any(c.tokens > 0 for c in costs):
        return USD if priced else TOKENS
    return CALLS


@dataclass(frozen=True)
class CostVerdict:
    """A child judged against the run's limit: `within` (always, without a limit) and the events to write."""

    within: bool = True
    events: tuple[Event, ...] = ()


def judge_child(
    limit: CostLimit | None, prices: Prices, outcome: Outcome, iteration: int, program_id: str
) -> CostVerdict:
    """The child's deploy cost from its validation `outcome` against `limit`: within iff its cost in the limit's
    unit is known and at most the limit. No limit, or a child that failed: within, and no event."""
    if limit is None or not outcome.ok:
        return CostVerdict()
    cost = DeployCost.from_usage(outcome.usage, len(outcome.ids))
    amount = cost.amount(limit.unit, prices)
    within = amount is not None and amount <= limit.amount
    payload = {**cost.as_dict(prices), "limit": str(limit), "cost": amount, "within": within}
    return CostVerdict(within, (Event(iteration, DEPLOY_COST_EVENT, program_id, payload),))


def check_cost_prices(limit: CostLimit | None, prices: Prices, models: Iterable[str]) -> None:
    """Before a run starts: a dollar limit needs a price for every model its AI functions are configured to
    call (embedded ones too: deployed, they cost money). ConfigError naming the first one without."""
    if limit is None or limit.unit != USD:
        return
    for model in dict.fromkeys(m for m in models if m):
        if model not in prices:
            raise ConfigError(
                f"--max-cost is in dollars, but the AI functions' model {model!r} has no price: add it to the "
                f"run's prices (--price {model}=IN,OUT in USD per 1M tokens, or {{'prices': {{'{model}': "
                "[IN, OUT]}}), or give the limit in calls or tokens"
            )
