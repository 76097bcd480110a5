"""Edits of an AI_COMPLETE call's prompt and model: what Snowflake's AI-function optimizer varies, for the
`prompt_only` baseline (`prompt_only`).

The optimizer "generates candidate implementations by modifying the function's prompt and model configuration";
every candidate calls AI_COMPLETE exactly once ("Optimize an AI function"). So these edits change only the call's
arguments, never the SQL around it, and never add a call:

- model: the call's model literal set to another of the configured candidate models;
- label_list: the instruction says which answers there are (the training rows' labels), when it does not;
- describe_label: a line saying what sets a label the parent keeps missing apart (words mined from its
  training rows, `label_words`), as a reflection on the failures would write it;
- few_shot: training rows as examples in the prompt (the targeted failures, failing rows, every row of the label
  missed most, or every training row; a diverse subset when capped, `examples.capped`), one literal block
  `Examples:` put before the part of the prompt that reads the row; a later edit rewrites that block;
- shrink_examples: a diverse subset of a large block (every example is sent with every row).

The prompt is read as its top-level `||` parts: the new literals go before the first part that reads a column,
so the instruction, then the label list, descriptions and examples, then the row's own text. Only training rows
are read (`CompleteView`); everything random comes from the injected RNG.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce

import numpy as np
from sqlglot import exp

from coco_sql.languages.sql.mutate.ai_edits import TrainingRow, confusions
from coco_sql.languages.sql.mutate.edits import Edit
from coco_sql.languages.sql.mutate.examples import Vectors, capped
from coco_sql.languages.sql.mutate.label_words import distinctive_words
from coco_sql.plugin_loader import SANDBOX_DIALECT

BLOCK = "\nExamples:\n"
MAX_LABELS = 40  # a label list longer than this is no instruction
SHRINK_SIZES = (8, 32)
_EXAMPLE = re.compile(r"Input: (.*?)\nAnswer: (.*?)\n")


@dataclass(frozen=True)
class CompleteView:
    """One AI_COMPLETE call on the training rows: the text each row gives the prompt (the columns it reads),
    with the gold and the parent's labels."""

    rows: tuple[TrainingRow, ...]
    text_sql: str  # the DuckDB expression of that text over the call's scope
    vectors: Vectors


def complete_calls(query: exp.Expression) -> list[exp.Anonymous]:
    return [n for n in query.walk() if isinstance(n, exp.Anonymous) and n.name.upper() == "AI_COMPLETE"]


def row_text_sql(call: exp.Anonymous) -> str | None:
    """The DuckDB expression of what a row gives the prompt: its one column, or `name: value` lines of each."""
    if len(call.expressions) < 2:
        return None
    columns = list(
        dict.fromkeys(c.sql(dialect=SANDBOX_DIALECT) for c in call.expressions[1].find_all(exp.Column))
    )
    if not columns:
        return None
    if len(columns) == 1:
        return f"CAST({columns[0]} AS VARCHAR)"
    lines = [f"'{c.replace(chr(39), chr(39) * 2)}: ' || CAST({c} AS VARCHAR)" for c in columns]
    return " || chr(10) || ".join(lines)


def prompt_edits(
    query: exp.Expression,
    views: dict[int, CompleteView],
    targets: Sequence[str],
    models: Sequence[str],
    rng: np.random.Generator,
    max_examples: int = 0,
    batch: int = 10,
) -> list[Edit]:
    """Every prompt-and-model edit of the parent's AI_COMPLETE calls (module docstring), most specific first."""
    edits: list[Edit] = []
    for index, call in enumerate(complete_calls(query)):
        where = f"AI_COMPLETE #{index + 1}"
        current = call.expressions[0]
        for model in models:
            if not (current.is_string and current.name == model):
                edits.append(Edit("model", f"{where}: model {model!r}", _set_model(index, model)))
        view = views.get(index)
        if view is None or len(call.expressions) < 2:
            continue
        parts = _parts(call.expressions[1])
        written = " ".join(p.name for p in parts if p.is_string)
        existing = _block_examples(parts)
        known = {e["input"] for e in existing}
        fresh = [r for r in view.rows if r.text not in known and len(r.gold) == 1]
        labels = sorted({r.gold[0] for r in view.rows if r.gold})
        edits += _few_shot_edits(index, where, view, fresh, existing, targets, rng, max_examples, batch)
        for size in SHRINK_SIZES:
            if len(existing) > 2 * size:
                kept, _ = capped(existing, [], rng, view.vectors, size)
                edits.append(
                    Edit(
                        "shrink_examples",
                        f"{where}: keep a diverse {len(kept)} of its {len(existing)} examples",
                        _set_block(index, kept),
                    )
                )
        if 1 < len(labels) <= MAX_LABELS and not all(label in written for label in labels):
            line = f"Answer with exactly one of: {', '.join(labels)}. "
            edits.append(
                Edit("label_list", f"{where}: say the answers are {', '.join(labels)}", _add(index, line))
            )
        for missed, wrong, count in confusions(view.rows)[:3]:
            words = distinctive_words(view.rows, missed)
            line = f"'{missed}' is for text about: {', '.join(words)}. "
            if words and line not in written:
                edits.append(
                    Edit(
                        "describe_label",
                        f"{where}: describe {missed!r} as {', '.join(words)!r} (missed {count}x, often as {wrong!r})",
                        _add(index, line),
                    )
                )
    return edits


def example_texts(query: exp.Expression) -> set[str]:
    """The inputs of every example block in the program's AI_COMPLETE prompts."""
    return {
        e["input"]
        for call in complete_calls(query)
        if len(call.expressions) > 1
        for e in _block_examples(_parts(call.expressions[1]))
    }


def _few_shot_edits(
    index: int,
    where: str,
    view: CompleteView,
    fresh: list[TrainingRow],
    existing: list[dict[str, object]],
    targets: Sequence[str],
    rng: np.random.Generator,
    max_examples: int,
    batch: int,
) -> list[Edit]:
    by_id = {r.instance_id: r for r in fresh}
    wanted = [by_id[t] for t in targets if t in by_id][:batch]
    failing = [r for r in fresh if set(r.gold) != set(r.predicted)]
    if len(failing) > batch:
        failing = [failing[int(i)] for i in sorted(rng.choice(len(failing), size=batch, replace=False))]
    groups = [(wanted, "the targeted failures"), (failing, "failing rows")]
    groups += [
        ([r for r in fresh if m in r.gold], f"every row labelled {m!r}")
        for m, _, _ in confusions(view.rows)[:1]
    ]
    groups.append((fresh, "every training row"))
    edits = []
    for rows, what in groups:
        if not rows:
            continue
        kept, added = capped(existing, rows, rng, view.vectors, max_examples)
        block = [*kept, *({"input": r.text, "labels": list(r.gold)} for r in added)]
        cut = f", keep {len(kept)} of {len(existing)}" if len(kept) < len(existing) else ""
        description = f"{where}: {len(added)} training rows as examples in the prompt ({what}){cut}"
        edits.append(Edit("few_shot", description, _set_block(index, block)))
    return edits


def _parts(prompt: exp.Expression) -> list[exp.Expression]:
    """The top-level `||` operands of a prompt, in order."""
    if isinstance(prompt, exp.DPipe):
        return _parts(prompt.this) + _parts(prompt.expression)
    if isinstance(prompt, exp.Paren) and isinstance(prompt.this, exp.DPipe):
        return _parts(prompt.this)
    return [prompt]


def _joined(parts: Sequence[exp.Expression]) -> exp.Expression:
    return reduce(lambda left, right: exp.DPipe(this=left, expression=right, safe=True), parts)


def _data_position(parts: Sequence[exp.Expression]) -> int:
    """Where a new instruction goes: before the first part that reads a column (else at the end)."""
    return next((i for i, p in enumerate(parts) if p.find(exp.Column) is not None), len(parts))


def _block_examples(parts: Sequence[exp.Expression]) -> list[dict[str, object]]:
    """The examples of the prompt's block, as a config's examples ({input, labels}: `examples.capped` takes them)."""
    for part in parts:
        if part.is_string and part.name.startswith(BLOCK):
            return [{"input": text, "labels": [label]} for text, label in _EXAMPLE.findall(part.name)]
    return []


def _first_label(example: dict[str, object]) -> str:
    labels = example.get("labels")
    return str(labels[0]) if isinstance(labels, list) and labels else ""


def one_line(text: str) -> str:
    """A row's text as an example block holds it (and as the view compares it): whitespace runs as one space."""
    return " ".join(text.split())


def _rewrite(
    index: int, change: Callable[[exp.Anonymous], None]
) -> Callable[[exp.Expression], exp.Expression]:
    def apply(query: exp.Expression) -> exp.Expression:
        child = query.copy()
        change(complete_calls(child)[index])
        return child

    return apply


def _set_model(index: int, model: str) -> Callable[[exp.Expression], exp.Expression]:
    def change(call: exp.Anonymous) -> None:
        call.expressions[0].replace(exp.Literal.string(model))

    return _rewrite(index, change)


def _add(index: int, line: str) -> Callable[[exp.Expression], exp.Expression]:
    """The literal `line` put where new instructions go (`_data_position`), before an example block."""

    def change(call: exp.Anonymous) -> None:
        parts = [p.copy() for p in _parts(call.expressions[1])]
        at = _data_position(parts)
        block = next((i for i, p in enumerate(parts) if p.is_string and p.name.startswith(BLOCK)), at)
        parts.insert(min(at, block), exp.Literal.string(line))
        call.expressions[1].replace(_joined(parts))

    return _rewrite(index, change)


def _set_block(
    index: int, examples: Sequence[dict[str, object]]
) -> Callable[[exp.Expression], exp.Expression]:
    """The prompt's example block replaced by (or, without one, given) `examples` ({input, labels})."""
    lines = (f"Input: {one_line(str(e['input']))}\nAnswer: {_first_label(e)}\n" for e in examples)
    text = BLOCK + "".join(lines) + "\n"

    def change(call: exp.Anonymous) -> None:
        parts = [p.copy() for p in _parts(call.expressions[1])]
        found = [i for i, p in enumerate(parts) if p.is_string and p.name.startswith(BLOCK)]
        if found:
            parts[found[0]] = exp.Literal.string(text)
        else:
            parts.insert(_data_position(parts), exp.Literal.string(text))
        call.expressions[1].replace(_joined(parts))

    return _rewrite(index, change)
