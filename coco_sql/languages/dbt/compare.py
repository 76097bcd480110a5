"""Compare a model's rows with the expected rows, key by key: the score of one target model.

A row scores 1 when its key is in both tables once and every compared column agrees: numbers within
``abs_tol + rel_tol * |expected|``, everything else equal as text (dates as ISO dates), NULL only with NULL.
The score of a model is the matched rows over the union of keys, so a missing row and a row that should not be
there cost the same. Values are read loosely on purpose: expected rows come from CSV files and actual rows
from DuckDB, so ``1``, ``1.0`` and ``"1"`` are one number and ``2018-01-01`` and a date are one date.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class Tolerance:
    abs_tol: float = 1e-9
    rel_tol: float = 0.0


@dataclass(frozen=True)
class ModelScore:
    """How one model's rows compare with the expected rows."""

    matched: int
    expected: int
    missing: tuple[str, ...]  # keys expected but absent
    unexpected: tuple[str, ...]  # keys present but not expected
    wrong: Mapping[str, tuple[str, ...]] = field(hash=False)  # key -> the columns that differ
    columns: int = 1  # how many columns were compared

    @property
    def total(self) -> int:
        return self.expected + len(self.unexpected)

    @property
    def score(self) -> float:
        """Rows that agree on every compared column, over the union of keys."""
        return self.matched / self.total if self.total else 1.0

    @property
    def partial(self) -> float:
        """Partial credit: each row present in both counts the share of its compared columns that agree."""
        if not self.total:
            return 1.0
        present = self.expected - len(self.missing)
        differing = sum(len(columns) for columns in self.wrong.values())
        return (present - differing / max(self.columns, 1)) / self.total


def _value(cell: Any) -> Any:
    """A comparable form: None, a float, or text (dates and timestamps at midnight as ``YYYY-MM-DD``)."""
    if cell is None or cell is pd.NA or cell is pd.NaT:
        return None
    if isinstance(cell, float) and math.isnan(cell):
        return None
    if isinstance(cell, bool):
        return str(cell).lower()
    if not isinstance(cell, str) and hasattr(cell, "__float__"):  # int, float, Decimal, numpy scalars
        try:
            return float(cell)
        except (TypeError, ValueError):
            return str(cell)
    if isinstance(cell, (dt.datetime, pd.Timestamp)):
        stamp = pd.Timestamp(cell)
        return stamp.date().isoformat() if stamp == stamp.normalize() else stamp.isoformat()
    if isinstance(cell, dt.date):
        return cell.isoformat()
    text = str(cell)
    try:
        return float(text)
    except ValueError:
        return text.lower() if text.lower() in ("true", "false") else text


def _agree(actual: Any, expected: Any, tolerance: Tolerance) -> bool:
    a, e = _value(actual), _value(expected)
    if a is None or e is None:
        return a is None and e is None
    if isinstance(a, float) and isinstance(e, float):
        return abs(a - e) <= tolerance.abs_tol + tolerance.rel_tol * abs(e)
    return str(a) == str(e)


def _keyed(frame: pd.DataFrame, key: str, what: str) -> tuple[dict[str, dict[str, Any]], set[str]]:
    if key not in frame.columns:
        raise ValueError(
            f"{what} rows have no key column {key!r} (columns: {', '.join(map(str, frame.columns))})"
        )
    rows: dict[str, dict[str, Any]] = {}
    repeated: set[str] = set()
    for record in frame.to_dict(orient="records"):
        name = str(_value(record[key]))
        name = name.removesuffix(".0") if name.endswith(".0") else name
        if name in rows:
            repeated.add(name)
        rows[name] = record
    return rows, repeated


def compare_rows(
    actual: pd.DataFrame,
    expected: pd.DataFrame,
    key: str,
    columns: Sequence[str],
    tolerances: Mapping[str, Tolerance] | None = None,
) -> ModelScore:
    """Score `actual` against `expected` on `columns`, matching rows by `key` (see the module docstring).
    A key that appears twice in `actual` never matches; a compared column `actual` lacks fails every row."""
    tolerances = tolerances or {}
    got, repeated = _keyed(actual, key, "actual")
    want, _ = _keyed(expected, key, "expected")
    matched = 0
    wrong: dict[str, tuple[str, ...]] = {}
    for name, row in want.items():
        if name not in got:
            continue
        if name in repeated:
            wrong[name] = (key,)
            continue
        differing = tuple(
            column
            for column in columns
            if column not in got[name]
            or not _agree(got[name][column], row[column], tolerances.get(column, Tolerance()))
        )
        if differing:
            wrong[name] = differing
        else:
            matched += 1
    return ModelScore(
        matched=matched,
        expected=len(want),
        missing=tuple(sorted(set(want) - set(got))),
        unexpected=tuple(sorted(set(got) - set(want))),
        wrong=wrong,
        columns=len(columns),
    )
