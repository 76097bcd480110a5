"""AI_CLASSIFY calls in a SQL tree and their literal arguments: found in a depth-first walk, their categories and
config read as Python values and written back. What every kind's offline edits of an AI step read and write: the
SQL kind's per-row edits (`languages.sql.mutate.ai_edits`: few-shot examples, descriptions, guards) and the dbt
kind's label repair (`languages.dbt.ai_labels`). Both spellings count: sqlglot's own `exp.AIClassify` and the
`Anonymous` call a dialect without it parses into."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from coco_sql.sqlkit.literals import to_node, to_python


def classify_calls(query: exp.Expression) -> list[exp.Expression]:
    """Every AI_CLASSIFY call of `query`, in a depth-first walk (an edit addresses a call by its index here)."""
    return [
        node
        for node in query.walk()
        if isinstance(node, exp.AIClassify)
        or (isinstance(node, exp.Anonymous) and node.name.upper() == "AI_CLASSIFY")
    ]


def _arguments(call: exp.Expression) -> list[exp.Expression | None]:
    if isinstance(call, exp.AIClassify):
        return [call.this, call.args.get("categories"), call.args.get("config")]
    args = list(call.expressions)
    return args + [None] * (3 - len(args))


@dataclass(frozen=True)
class ClassifySpec:
    """The literal arguments of one AI_CLASSIFY call, as Python values."""

    categories: list[Any]
    config: dict[str, Any]

    @property
    def labels(self) -> list[str]:
        return [c if isinstance(c, str) else c["label"] for c in self.categories]

    @property
    def example_inputs(self) -> set[str]:
        return {e["input"] for e in self.config.get("examples") or [] if isinstance(e, dict) and "input" in e}


def read_spec(call: exp.Expression) -> ClassifySpec | None:
    """The call's categories and config, when both are literals (else the call is not edited)."""
    _, categories, config = _arguments(call)
    try:
        values = to_python(categories), to_python(config) or {}
    except ValueError:
        return None
    if not isinstance(values[0], list) or not isinstance(values[1], dict):
        return None
    return ClassifySpec(values[0], values[1])


def set_spec(call: exp.Expression, spec: ClassifySpec) -> None:
    """Write `spec` as the call's literal categories and config (in place)."""
    categories, config = to_node(spec.categories), to_node(spec.config)
    if isinstance(call, exp.AIClassify):
        call.set("categories", categories)
        call.set("config", config)
    else:
        call.set("expressions", [call.expressions[0], categories, config])


__all__ = ["ClassifySpec", "classify_calls", "read_spec", "set_spec"]
