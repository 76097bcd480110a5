"""What one AI call costs on a warehouse, per row it runs on, as AI_COUNT_TOKENS expressions (`meter` puts
them in the query): the input counted over the call's arguments, a constant part counted once per query, and the
output counted over its answer. `RULES` has one entry per function Cortex bills that has an AI_COUNT_TOKENS form
("Cost considerations for Cortex AI Functions": input and output tokens for the functions that generate text,
input only for AI_EMBED, AI_SIMILARITY and AI_SENTIMENT).

AI_CLASSIFY follows `engines.duckdb.ai.billing.bill_classify`'s formula, what the embedded stand-in bills locally: the
input, each category ('label: description'), each example's input and its labels' JSON, and the answer's JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from coco_sql.errors import EvaluationError
from coco_sql.sqlkit.ai_arguments import category_prototypes
from coco_sql.sqlkit.literals import to_python


class Unmetered(EvaluationError):
    """A query whose AI calls cannot be billed on the warehouse (module docstring); it is not run."""


@dataclass(frozen=True)
class Rule:
    """How one function bills: the argument whose NULL means no call, the per-row input count, the constant
    input texts per call (or None), and the output count over the answer (None: input tokens only)."""

    live: int
    count: Callable[[list[exp.Expression]], exp.Expression]
    constants: Callable[[list[exp.Expression]], list[str]] | None = None
    output: Callable[[exp.Expression, list[exp.Expression]], exp.Expression] | None = None
    model: int | None = None  # the argument naming the model, if the function takes one


def tokens(function: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="AI_COUNT_TOKENS", expressions=[exp.Literal.string(function), *args])


def _classify_count(args: list[exp.Expression]) -> exp.Expression:
    if literal(args[1]) is None:  # categories not written out: Cortex's own three-argument form counts them
        return tokens("ai_classify", args[0], args[1])
    return tokens("ai_classify", args[0])


def _classify_constants(args: list[exp.Expression]) -> list[str]:
    """The texts `billing.bill_classify` adds to every row: each category and each example's input and labels."""
    given_config = len(args) > 2 and not isinstance(args[2], exp.Null)
    categories, config = literal(args[1]), literal(args[2]) if given_config else {}
    if not isinstance(config, dict):
        raise Unmetered("AI_CLASSIFY's config_object is not a literal, so its examples cannot be counted")
    texts: list[str] = []
    labels: list[str] = []
    if categories is not None:
        try:
            labels, texts = category_prototypes(categories)
        except Exception as error:  # Cortex refuses these categories: the query fails on them anyway
            raise Unmetered(f"AI_CLASSIFY's categories: {error}") from None
    for example in (config or {}).get("examples") or []:
        if not isinstance(example, dict) or not isinstance(example.get("input"), str):
            raise Unmetered("an AI_CLASSIFY example without a text input cannot be counted")
        given = example.get("labels")
        given = [given] if isinstance(given, str) else list(given or [])
        texts += [example["input"], json.dumps([g for g in given if not labels or g in labels])]
    return texts


def _classify_output(answer: exp.Expression, _: list[exp.Expression]) -> exp.Expression:
    """tokens of json.dumps({"labels": [...]}), the text billing counts (TO_JSON puts no space after commas)."""
    text = sqlglot.parse_one(
        """'{"labels": ' || REPLACE(TO_JSON(__coco_answer:labels), '","', '", "') || '}'""", read="snowflake"
    )
    text = text.transform(
        lambda n: answer.copy() if isinstance(n, exp.Column) and n.name == "__coco_answer" else n
    )
    return tokens("ai_classify", text)


def _complete_output(answer: exp.Expression, args: list[exp.Expression]) -> exp.Expression:
    return tokens("ai_complete", args[0].copy(), exp.cast(answer, "VARCHAR"))


def _filter_output(answer: exp.Expression, _: list[exp.Expression]) -> exp.Expression:
    return tokens("ai_filter", exp.cast(answer, "VARCHAR"))


RULES: Mapping[str, Rule] = {
    "AI_CLASSIFY": Rule(0, _classify_count, _classify_constants, _classify_output),
    "AI_COMPLETE": Rule(1, lambda a: tokens("ai_complete", a[0], a[1]), output=_complete_output, model=0),
    "AI_EMBED": Rule(1, lambda a: tokens("ai_embed", a[0], a[1]), model=0),
    "AI_SIMILARITY": Rule(0, lambda a: tokens("ai_similarity", *a[:3])),
    "AI_FILTER": Rule(0, lambda a: tokens("ai_filter", a[0]), output=_filter_output),
    "AI_SENTIMENT": Rule(0, lambda a: tokens("ai_sentiment", a[0])),
}
INPUT_ONLY = frozenset(name for name, rule in RULES.items() if rule.output is None)


def literal(node: exp.Expression | None) -> Any:
    """A literal argument's value, or None when it is not a literal."""
    try:
        return to_python(node)
    except ValueError:
        return None
