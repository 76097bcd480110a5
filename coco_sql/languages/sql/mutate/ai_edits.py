"""Edits of AI-function pipelines: the offline mutator's hypotheses for programs that call AI_CLASSIFY.

Each edit rewrites the literal arguments of one AI_CLASSIFY call (addressed by its index in a depth-first walk),
using what the training rows show:

- few_shot: add training rows as `examples` in the config: the rows the curator targets, every row of a label
  the parent keeps missing, or every training row; never more than `examples.MAX_EXAMPLES` in all, a diverse
  subset drawn from the injected RNG when more are offered (`examples`);
- prune_examples: drop the examples that the other examples get entirely wrong (Wilson editing: likely label
  noise), judged on the cross-fitted predictions;
- shrink_examples: keep a diverse subset (16 or 64) of many examples: each one is billed on every row;
- describe_label: give a label a description mined from its training rows (the words that set its texts apart
  from the others), aimed at the label the parent confuses most;
- output_mode: switch between 'single' and 'multi', only for a multi-label contract (VARCHAR[]); a single-label
  program reads one label (`labels[0]`), and 'multi' would hand it the first of several in category order, not
  the most likely one, so there the only edit is back to 'single';
- keyword_guard: a deterministic rule mined from the training rows in front of the AI call,
  `CASE WHEN <input> ILIKE '%word%' THEN <label> ELSE <AI call> END`, for the words whose guard would gain most
  over the parent's own predictions on the rows they match;
- similarity_guard: a cascade with a tuned threshold, `CASE WHEN AI_SIMILARITY(<input>, '<label: description>') >
  t THEN <label> ELSE <AI call> END`: the cheap embedding answers where it is sure, the AI call elsewhere; t is the
  cut on the training rows' similarities that gains most (needs AI_SIMILARITY enabled by the task).

The data comes from a `TrainingView` (training rows only: their input text, gold labels and the parent's
prediction). Nothing here runs a query; the mutator tests every edit on the training rows before commit.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlglot import exp

from coco_sql.languages.sql.mutate.edits import Edit
from coco_sql.languages.sql.mutate.examples import MAX_EXAMPLES, Vectors, capped
from coco_sql.languages.sql.mutate.guard_rules import (
    MIN_SUPPORT,
    Support,
    base_rates,
    refused,
    significant_guards,
    stop_words,
    support,
)
from coco_sql.languages.sql.mutate.label_words import distinctive_words
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.sqlkit.ai_classify import ClassifySpec, classify_calls, read_spec, set_spec

SHRINK_SIZES = (16, 64)  # the example subsets `shrink_examples` offers


@dataclass(frozen=True)
class TrainingRow:
    instance_id: str
    text: str
    gold: tuple[str, ...]
    predicted: tuple[str, ...]


@dataclass(frozen=True)
class TrainingView:
    """What the mutator knows about one AI_CLASSIFY call on the training rows."""

    rows: tuple[TrainingRow, ...]
    input_sql: str  # the call's input expression (the guard tests it)
    scope_sql: str = ""  # a query returning every row and column the call's SELECT sees (for probes)
    # label -> (the text its similarity is measured to, AI_SIMILARITY(input, text) per training row id)
    similarities: Mapping[str, tuple[str, Mapping[str, float]]] = field(default_factory=dict)
    # input text -> its embedding, for choosing diverse few-shot examples (empty: chosen at random per label)
    vectors: Vectors = field(default_factory=dict)
    # ids of likely label errors (`label_noise`): never few-shot examples, never counted when a guard is fitted
    suspects: frozenset[str] = frozenset()


def _replace_spec(index: int, spec: ClassifySpec) -> Callable[[exp.Expression], exp.Expression]:
    def apply(query: exp.Expression) -> exp.Expression:
        child = query.copy()
        set_spec(classify_calls(child)[index], spec)
        return child

    return apply


def _with_guard(
    index: int, input_sql: str, word: str, label: str
) -> Callable[[exp.Expression], exp.Expression]:
    """CASE WHEN <input> ILIKE '%word%' THEN <the object AI_CLASSIFY would return for label> ELSE <call> END."""

    def condition() -> exp.Expression:
        return exp.ILike(
            this=exp.maybe_parse(input_sql, dialect=SANDBOX_DIALECT),
            expression=exp.Literal.string(f"%{word}%"),
        )

    return _guarded(index, condition, label)


def _with_similarity_guard(
    index: int, input_sql: str, text: str, threshold: float, label: str
) -> Callable[[exp.Expression], exp.Expression]:
    """The cascade: CASE WHEN AI_SIMILARITY(<input>, text) > threshold THEN <label> ELSE <call> END."""

    def condition() -> exp.Expression:
        similarity = exp.Anonymous(
            this="AI_SIMILARITY",
            expressions=[exp.maybe_parse(input_sql, dialect=SANDBOX_DIALECT), exp.Literal.string(text)],
        )
        return exp.GT(this=similarity, expression=exp.Literal.number(round(threshold, 4)))

    return _guarded(index, condition, label)


def answer_of(call: exp.Expression) -> exp.Expression:
    """The expression whose value is the call's answer: the call itself, or the outermost CASE it is a branch
    of (earlier guards, a proxy in front of it). A new guard wraps this, so that it overrides them all, as its
    gain was measured against the parent's predictions with them."""
    node = call
    while True:
        parent = node.parent
        if isinstance(parent, exp.Case) and node.arg_key == "default":
            node = parent
        elif isinstance(parent, exp.If) and node.arg_key == "true" and isinstance(parent.parent, exp.Case):
            node = parent.parent
        else:
            return node


def _guarded(
    index: int, condition: Callable[[], exp.Expression], label: str
) -> Callable[[exp.Expression], exp.Expression]:
    def apply(query: exp.Expression) -> exp.Expression:
        child = query.copy()
        answer = answer_of(classify_calls(child)[index])
        fixed = exp.Anonymous(
            this="PARSE_JSON",
            expressions=[exp.Literal.string('{"labels": ["' + label.replace('"', "") + '"]}')],
        )
        answer.replace(exp.Case(ifs=[exp.If(this=condition(), true=fixed)], default=answer.copy()))
        return child

    return apply


# -- mining (the words of a label: languages.sql.mutate.label_words) -----------------------------------------
def set_f1(predicted: Sequence[str], gold: Sequence[str]) -> float:
    p, g = set(predicted), set(gold)
    if not p and not g:
        return 1.0
    return 2 * len(p & g) / (len(p) + len(g))


def guard_candidates(
    rows: Sequence[TrainingRow],
    labels: Sequence[str],
    limit: int = 6,
    excluded: Collection[str] = (),
) -> list[tuple[str, str, Support, float]]:
    """(pattern, label, support, gain) for `CASE WHEN input ILIKE '%pattern%' THEN label`, best gain first.

    Patterns are the training rows' words, alone (words of 4+ letters, matched as substrings) or with a space
    on each side (any word, matched mid-text). The gain is exactly what the guard would change on the training
    rows it matches: sum of F1(label vs gold) - F1(parent's prediction vs gold), so a word of the majority
    label that the parent already gets right gains nothing. A candidate must stand on the training rows
    (`guard_rules`: support, a binomial test against the label's base rate corrected for every candidate tried,
    no stop word); rows in `excluded` (likely label errors, `label_noise`) are not counted."""
    rows = [r for r in rows if r.instance_id not in excluded]
    lowered = [r.text.lower() for r in rows]
    tokens = [set(re.findall(r"[a-z0-9']+", text)) for text in lowered]
    stops = stop_words(tokens, [r.gold for r in rows])
    patterns: set[str] = set()
    for words in tokens:
        for word in words:
            if refused(word, stops):
                continue
            patterns.add(f" {word} ")
            if len(word) >= 4:
                patterns.add(word)
    counts: dict[tuple[str, str], tuple[int, int]] = {}
    matches: dict[str, list[TrainingRow]] = {}
    for pattern in sorted(patterns):
        matched = [r for r, text in zip(rows, lowered, strict=True) if pattern in text]
        if len(matched) < MIN_SUPPORT:
            continue
        matches[pattern] = matched
        for label in labels:
            counts[(pattern, label)] = (len(matched), sum(1 for r in matched if label in r.gold))
    standing = significant_guards(counts, base_rates([r.gold for r in rows]))
    found: list[tuple[float, int, str, str]] = []
    for (pattern, label), _ in standing.items():
        matched = matches[pattern]
        before = sum(set_f1(r.predicted, r.gold) for r in matched)
        gain = sum(set_f1([label], r.gold) for r in matched) - before
        if gain >= 1.0:
            found.append((gain, len(matched), pattern, label))
    found.sort(key=lambda f: (-f[0], -f[1], f[2], f[3]))
    return [(pattern, label, standing[(pattern, label)], gain) for gain, _, pattern, label in found[:limit]]


def similarity_thresholds(
    rows: Sequence[TrainingRow],
    label: str,
    similarity: Mapping[str, float],
    excluded: Collection[str] = (),
) -> tuple[float, Support, float] | None:
    """(threshold, its support, gain) of the best cascade guard `similarity > threshold -> label`, if any gains
    and stands (`guard_rules`: support and a binomial test against the label's base rate, corrected for every
    threshold tried).

    Candidate thresholds sit halfway between consecutive observed similarities; the gain is what the guard
    changes on the rows above the threshold: sum F1(label vs gold) - F1(parent's prediction vs gold). Rows in
    `excluded` (likely label errors) are not counted."""
    kept = [r for r in rows if r.instance_id not in excluded and r.instance_id in similarity]
    scored = sorted(
        (
            (
                similarity[r.instance_id],
                set_f1([label], r.gold) - set_f1(r.predicted, r.gold),
                label in r.gold,
            )
            for r in kept
        ),
        key=lambda s: s[0],
        reverse=True,
    )
    rate = base_rates([r.gold for r in kept]).get(label, 0.0)
    tried = max(len(scored) - MIN_SUPPORT, 1)
    best: tuple[float, Support, float] | None = None
    gain, hits = 0.0, 0
    for count, (value, delta, hit) in enumerate(scored[:-1], start=1):
        gain += delta
        hits += hit
        threshold = (value + scored[count][0]) / 2
        if count < MIN_SUPPORT or gain < 1.0 or (best is not None and gain <= best[2]):
            continue
        checked = support(hits, count, rate, tried)
        if checked.significant:
            best = (threshold, checked, gain)
    return best


def confusions(rows: Sequence[TrainingRow]) -> list[tuple[str, str, int]]:
    """(gold label missed, label predicted instead, count), most frequent first."""
    counts: Counter[tuple[str, str]] = Counter()
    for row in rows:
        for missed in set(row.gold) - set(row.predicted):
            for wrong in set(row.predicted) - set(row.gold) or {"(nothing)"}:
                counts[(missed, wrong)] += 1
    return [(a, b, n) for (a, b), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def _few_shot(
    index: int,
    spec: ClassifySpec,
    rows: Sequence[TrainingRow],
    what: str,
    choice: tuple[np.random.Generator, Vectors, int],
) -> Edit:
    """Add `rows` as examples, or a diverse subset of them and the call's examples when more than the limit."""
    rng, vectors, limit = choice
    existing = list(spec.config.get("examples") or [])
    kept, added = capped(existing, rows, rng, vectors, limit)
    config = {**spec.config, "examples": [*kept, *(_example(r) for r in added)]}
    taken = f"{len(added)} of {len(rows)}" if len(added) < len(rows) else f"{len(rows)}"
    cut = f", keep {len(kept)} of {len(existing)} examples" if len(kept) < len(existing) else ""
    subset = "; a diverse subset" if len(added) < len(rows) or cut else ""
    return Edit(
        "few_shot",
        f"AI_CLASSIFY #{index + 1}: add {taken} training rows as examples ({what}{subset}){cut}",
        _replace_spec(index, ClassifySpec(spec.categories, config)),
    )


def _description(category: Any) -> str | None:
    return category.get("description") if isinstance(category, Mapping) else None


def _example(row: TrainingRow) -> dict[str, Any]:
    return {"input": row.text, "labels": list(row.gold)}


def ai_edits(
    query: exp.Expression,
    views: Mapping[int, TrainingView],
    targets: Sequence[str],
    batch: int = 10,
    *,
    rng: np.random.Generator | None = None,
    multi_label: bool = True,
    max_examples: int = MAX_EXAMPLES,
) -> list[Edit]:
    """Every AI-pipeline hypothesis for the parent, most specific first.

    `rng` draws the few-shot subsets (the mutator passes its stream of the iteration; None: a fixed generator,
    for tools and tests outside a run). `multi_label` is False for a single-label contract: no edit then turns
    output_mode 'multi' on. At most `max_examples` examples per call."""
    generator = rng if rng is not None else np.random.default_rng(0)
    edits: list[Edit] = []
    for index, call in enumerate(classify_calls(query)):
        spec, view = read_spec(call), views.get(index)
        if spec is None or view is None:
            continue
        labels = spec.labels
        known = spec.example_inputs
        fresh = [
            r
            for r in view.rows
            if r.text not in known and set(r.gold) <= set(labels) and r.instance_id not in view.suspects
        ]
        by_id = {r.instance_id: r for r in fresh}
        wanted = [by_id[t] for t in targets if t in by_id][:batch]
        failing = [r for r in fresh if set(r.gold) != set(r.predicted)]
        if (
            len(failing) > batch
        ):  # a fresh draw each time: the first rows by id would be offered again and again
            failing = [
                failing[int(i)] for i in sorted(generator.choice(len(failing), size=batch, replace=False))
            ]
        where = f"AI_CLASSIFY #{index + 1}"
        choice = (generator, view.vectors, max_examples)

        groups = [(wanted, "the targeted failures"), (failing, "failing rows")]
        groups += [
            ([r for r in fresh if m in r.gold], f"every row labelled {m!r}")
            for m, _, _ in confusions(view.rows)[:2]
        ]
        groups.append((fresh, "every training row"))
        edits.extend(_few_shot(index, spec, rows, what, choice) for rows, what in groups if rows)
        # Editing (Wilson): an example that its neighbours get entirely wrong is likely noise; drop those.
        contradicted = {
            r.text
            for r in view.rows
            if r.text in known and (set_f1(r.predicted, r.gold) == 0.0 or r.instance_id in view.suspects)
        }
        if contradicted:
            kept = [
                e
                for e in spec.config.get("examples") or []
                if not (isinstance(e, dict) and e.get("input") in contradicted)
            ]
            edits.append(
                Edit(
                    "prune_examples",
                    f"{where}: drop {len(contradicted)} examples that the other examples contradict",
                    _replace_spec(index, ClassifySpec(spec.categories, {**spec.config, "examples": kept})),
                )
            )
        # Shrinking (deploy cost): every example rides in the prompt of every row the call answers, so offer a
        # diverse subset when there are many; the draft's worth counts the saving (`ai_pipeline`).
        existing = list(spec.config.get("examples") or [])
        for size in SHRINK_SIZES:
            if len(existing) > 2 * size:
                kept, _ = capped(existing, [], generator, view.vectors, size)
                edits.append(
                    Edit(
                        "shrink_examples",
                        f"{where}: keep a diverse {len(kept)} of its {len(existing)} examples",
                        _replace_spec(
                            index, ClassifySpec(spec.categories, {**spec.config, "examples": kept})
                        ),
                    )
                )
        for missed, wrong, count in confusions(view.rows)[:3]:
            words = distinctive_words(view.rows, missed)
            if not words or missed not in labels:
                continue
            # Every category becomes {label, description}: a SQL array holds one type.
            categories = [
                {
                    "label": label,
                    "description": ", ".join(words) if label == missed else _description(category),
                }
                for label, category in zip(labels, spec.categories, strict=True)
            ]
            edits.append(
                Edit(
                    "describe_label",
                    f"{where}: describe {missed!r} as {', '.join(words)!r} (missed {count}x, often as {wrong!r})",
                    _replace_spec(index, ClassifySpec(categories, spec.config)),
                )
            )
        mode = str(spec.config.get("output_mode", "single")).lower()
        if multi_label or mode == "multi":
            config = {**spec.config, "output_mode": "single" if mode == "multi" else "multi"}
            edits.append(
                Edit(
                    "output_mode",
                    f"{where}: output_mode {config['output_mode']!r}",
                    _replace_spec(index, ClassifySpec(spec.categories, config)),
                )
            )
        if call.parent is not None:
            for pattern, label, stands, gain in guard_candidates(view.rows, labels, excluded=view.suspects):
                edits.append(
                    Edit(
                        "keyword_guard",
                        f"{where}: rows containing {pattern!r} are {label!r} "
                        f"({stands.rows} training rows, gain {gain:.1f}; {stands.text()})",
                        _with_guard(index, view.input_sql, pattern, label),
                    )
                )
        for label, (text, similarity) in sorted(view.similarities.items()):
            found = similarity_thresholds(view.rows, label, similarity, view.suspects)
            if found is not None and label in labels:
                threshold, stands, gain = found
                edits.append(
                    Edit(
                        "similarity_guard",
                        f"{where}: answer {label!r} without the AI call when AI_SIMILARITY to {text!r} > "
                        f"{threshold:.3f} ({stands.rows} training rows, gain {gain:.1f}; {stands.text()})",
                        _with_similarity_guard(index, view.input_sql, text, threshold, label),
                    )
                )
    return edits
