"""Per-row scorers: how close a candidate's output is to the expected value, in [0, 1].

Every scorer returns one score per row rather than an aggregate so that the search can build per-instance
score vectors (for Pareto-style selection and for feedback on the rows a candidate gets wrong). A ``None``
output means the row was missing from the candidate's result or could not be coerced to the contract
type; it always scores 0, so failing loudly is never better than answering.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import duckdb
import pandas as pd

from coco_sql.tasks.coerce import DEFAULT_LIST_SEPARATOR, coerce_output, coerce_outputs, is_missing

#: Scorer kinds a task.toml may name, in the order error messages list them.
SCORER_KINDS: tuple[str, ...] = ("exact", "numeric", "multilabel_f1", "token_match", "sql", "bound_ratio")


@runtime_checkable
class Scorer(Protocol):
    """Scores outputs against expected values row by row."""

    kind: str

    def score(self, outputs: Sequence[object | None], expected: Sequence[object]) -> list[float]:
        """One score in [0, 1] per row; ``None`` outputs score 0."""
        ...


def _check_lengths(outputs: Sequence[object | None], expected: Sequence[object]) -> None:
    if len(outputs) != len(expected):
        raise ValueError(f"outputs and expected differ in length ({len(outputs)} != {len(expected)})")


def _coerce_or_none(value: object, type_: str, separator: str = DEFAULT_LIST_SEPARATOR) -> object | None:
    """A value the contract cannot hold is treated like a missing one (scores 0) instead of crashing."""
    try:
        return coerce_output(value, type_, separator=separator)
    except ValueError:
        return None


@dataclass(frozen=True)
class ExactScorer:
    """1 if the output, coerced to the contract type, equals the expected value; else 0.

    Strings are compared exactly (case and whitespace matter); lists are compared in order. Use
    ``multilabel_f1`` or ``token_match`` when partial credit is wanted.
    """

    type_: str
    kind: str = "exact"

    def score(self, outputs: Sequence[object | None], expected: Sequence[object]) -> list[float]:
        _check_lengths(outputs, expected)
        values, _ = coerce_outputs(outputs, self.type_)  # what does not convert is None, as `_coerce_or_none`
        return [
            1.0 if value is not None and value == exp else 0.0
            for value, exp in zip(values, expected, strict=True)
        ]


@dataclass(frozen=True)
class NumericScorer:
    """1 if ``|output - expected| <= abs_tol + rel_tol * |expected|`` (numpy.isclose semantics), else 0."""

    abs_tol: float = 1e-9
    rel_tol: float = 0.0
    kind: str = "numeric"

    def score(self, outputs: Sequence[object | None], expected: Sequence[object]) -> list[float]:
        _check_lengths(outputs, expected)
        scores: list[float] = []
        for out, exp in zip(outputs, expected, strict=True):
            value = _coerce_or_none(out, "DOUBLE")
            if value is None or exp is None:
                scores.append(0.0)
                continue
            got, want = float(value), float(exp)  # type: ignore[arg-type]
            if math.isinf(want) or math.isinf(got):
                scores.append(1.0 if got == want else 0.0)
            else:
                scores.append(1.0 if abs(got - want) <= self.abs_tol + self.rel_tol * abs(want) else 0.0)
        return scores


def _label_set(value: object, separator: str) -> set[str] | None:
    labels = _coerce_or_none(value, "VARCHAR[]", separator)
    if labels is None:
        return None
    return {label.strip().lower() for label in labels if label.strip()}  # type: ignore[union-attr]


@dataclass(frozen=True)
class MultilabelF1Scorer:
    """Example-level F1 between predicted and gold label sets: ``2|P∩G| / (|P| + |G|)``; both empty = 1.

    Labels are compared case-insensitively after stripping, and duplicates count once. Outputs may be a
    list, a JSON array string (Snowflake ARRAY) or a ``separator``-joined string.
    """

    separator: str = DEFAULT_LIST_SEPARATOR
    kind: str = "multilabel_f1"

    def score(self, outputs: Sequence[object | None], expected: Sequence[object]) -> list[float]:
        _check_lengths(outputs, expected)
        scores: list[float] = []
        for out, exp in zip(outputs, expected, strict=True):
            predicted = _label_set(out, self.separator)
            gold = _label_set(exp, self.separator)
            if predicted is None or gold is None:
                scores.append(0.0)
            elif not predicted and not gold:
                scores.append(1.0)
            else:
                scores.append(2.0 * len(predicted & gold) / (len(predicted) + len(gold)))
        return scores


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and articles, collapse whitespace."""
    text = text.lower().translate(_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


@dataclass(frozen=True)
class TokenMatchScorer:
    """SQuAD-style token F1 between normalised output and expected text.

    If either side normalises to no tokens, the score is 1 when both do and 0 otherwise (as in the
    official SQuAD script), so an empty answer is only right when the gold answer is empty too.
    """

    kind: str = "token_match"

    def score(self, outputs: Sequence[object | None], expected: Sequence[object]) -> list[float]:
        _check_lengths(outputs, expected)
        scores: list[float] = []
        for out, exp in zip(outputs, expected, strict=True):
            value = _coerce_or_none(out, "VARCHAR")
            gold_value = _coerce_or_none(exp, "VARCHAR")
            if value is None or gold_value is None:
                scores.append(0.0)
                continue
            predicted = normalize_answer(str(value)).split()
            gold = normalize_answer(str(gold_value)).split()
            if not predicted or not gold:
                scores.append(1.0 if predicted == gold else 0.0)
                continue
            common = sum((Counter(predicted) & Counter(gold)).values())
            if common == 0:
                scores.append(0.0)
                continue
            precision, recall = common / len(predicted), common / len(gold)
            scores.append(2 * precision * recall / (precision + recall))
        return scores


@dataclass(frozen=True)
class SqlScorer:
    """A DuckDB expression over ``output`` and ``expected`` (both of the contract type), clamped to [0, 1].

    The expression runs in a fresh in-memory DuckDB per call over one row per instance, so it can use any
    scalar DuckDB function but no aggregates (checked by ``validate``). NULL results score 0. Outputs
    that cannot be coerced to the contract type arrive as NULL, and a missing output scores 0 without
    consulting the expression, keeping "None scores 0" true for every scorer.
    """

    expression: str
    type_: str
    kind: str = "sql"

    def _query(self) -> str:
        return f"SELECT i, ({self.expression}) AS s FROM scored ORDER BY i"

    def _frame(self, outputs: Sequence[object | None], expected: Sequence[object]) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "i": list(range(len(outputs))),
                "output": pd.Series([_coerce_or_none(o, self.type_) for o in outputs], dtype=object),
                "expected": pd.Series(list(expected), dtype=object),
            }
        )

    def _run(self, frame: pd.DataFrame) -> list[object]:
        with duckdb.connect(":memory:") as con:
            con.register("raw_scored", frame)
            con.execute(
                "CREATE TABLE scored AS SELECT CAST(i AS INTEGER) AS i, "
                f"CAST(output AS {self.type_}) AS output, CAST(expected AS {self.type_}) AS expected "
                "FROM raw_scored"
            ).fetchall()
            return [row[1] for row in con.execute(self._query()).fetchall()]

    def validate(self) -> None:
        """Raise ``ValueError`` (DuckDB's first message line) if the expression does not bind per row."""
        if ";" in self.expression:
            raise ValueError("must be a single expression (no ';')")
        frame = pd.DataFrame({"i": [0], "output": [None], "expected": [None]}, dtype=object)
        try:
            self._run(frame)
        except duckdb.Error as error:
            raise ValueError(str(error).strip().splitlines()[0]) from None

    def score(self, outputs: Sequence[object | None], expected: Sequence[object]) -> list[float]:
        _check_lengths(outputs, expected)
        if not outputs:
            return []
        results = self._run(self._frame(outputs, expected))
        scores: list[float] = []
        for out, result in zip(outputs, results, strict=True):
            if is_missing(out) or result is None:
                scores.append(0.0)
                continue
            try:
                value = float(result)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                scores.append(0.0)
                continue
            scores.append(0.0 if math.isnan(value) else min(1.0, max(0.0, value)))
        return scores


@dataclass(frozen=True)
class BoundRatioScorer:
    """``expected / output`` clamped to [0, 1], for a cost to minimise whose expected value is a lower bound.

    The TSP packs store a lower bound on the optimal tour length (the minimum spanning tree's length) as the
    expected value and the program's tour length as its output, so a shorter tour scores higher and no tour can
    reach 1. A missing, non-positive or non-finite output scores 0, and an output below the bound (impossible for
    a valid answer) is clamped to 1.
    """

    kind: str = "bound_ratio"

    def score(self, outputs: Sequence[object | None], expected: Sequence[object]) -> list[float]:
        _check_lengths(outputs, expected)
        scores: list[float] = []
        for out, exp in zip(outputs, expected, strict=True):
            value = _coerce_or_none(out, "DOUBLE")
            bound = _coerce_or_none(exp, "DOUBLE")
            if value is None or bound is None:
                scores.append(0.0)
                continue
            got, floor = float(value), float(bound)  # type: ignore[arg-type]
            if not (math.isfinite(got) and math.isfinite(floor)) or got <= 0 or floor < 0:
                scores.append(0.0)
            else:
                scores.append(min(1.0, floor / got))
        return scores
