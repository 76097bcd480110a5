"""Compare a model's rows with the expected rows, key by key: the score of one target model.

The scoring rule (the docs and the pack format say the same):

- **a row** present in both tables once scores the share of its columns that agree, its key's columns included
  (they agree: the row was found by its key), over its key and compared columns (`row_share`):
  numbers within ``abs_tol + rel_tol * |expected|``, everything else equal as text (dates as ISO dates, lists
  and structs as canonical JSON), NULL only with NULL. A missing row scores 0, and so does a key that appears
  twice;
- **a target** scores the sum of its rows' scores over the union of keys: expected rows plus the rows it
  returned that no expected row has (`ModelScore.partial`), so a missing row and an extra row cost the same;
- **a program** scores the weighted mean of its targets' scores (each target's `weight`, default 1), and the
  data tests' pass share with weight ``data_tests.weight`` of the whole (`language.DbtLanguage.aggregate`).

Values are read loosely on purpose: expected rows come from CSV files and actual rows from DuckDB, so ``1``,
``1.0`` and ``"1"`` are one number and ``2018-01-01`` and a date are one date.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

_MIDNIGHT = re.compile(r"\d{4}-\d{2}-\d{2}[ T]00:00:00(\.0+)?")


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
        """The target's score: each row present in both counts the share of its compared columns that agree (a
        repeated key counts 0), over the union of keys."""
        if not self.total:
            return 1.0
        present = self.expected - len(self.missing)
        lost = sum(
            1.0 if columns == ("(repeated key)",) else len(columns) / max(self.columns, 1)
            for columns in self.wrong.values()
        )
        return (present - lost) / self.total


def _value(cell: Any) -> Any:
    """A comparable form: None, a float, or text (dates and timestamps at midnight as ``YYYY-MM-DD``, lists and
    structs as canonical JSON of their items' comparable forms)."""
    kind = type(
        cell
    )  # the JSON scalars every scored row is made of first: a split's rows call this ~20 times each
    if kind is float:
        return None if math.isnan(cell) else cell
    if kind is int:
        return float(cell)
    if kind is str:
        return _text(cell)
    if kind is pd.Timestamp or kind is dt.datetime:
        return _stamp(cell)
    if cell is None or cell is pd.NA or cell is pd.NaT:
        return None
    if isinstance(cell, (list, tuple, dict)) or (hasattr(cell, "tolist") and getattr(cell, "ndim", 0)):
        return json.dumps(_nested(cell), sort_keys=True)
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
        return _stamp(cell)
    if isinstance(cell, dt.date):
        return cell.isoformat()
    return _text(str(cell))


@functools.lru_cache(maxsize=1 << 16)
def _stamp(cell: dt.datetime) -> str:
    """A timestamp's comparable text: its date at midnight; cached: a date column's values repeat."""
    stamp = pd.Timestamp(cell)
    return stamp.date().isoformat() if stamp == stamp.normalize() else stamp.isoformat()


@functools.lru_cache(maxsize=1 << 16)
def _text(text: str) -> float | str:
    """A text cell's comparable form (a number, a date, a boolean, or the text); cached: a column's texts repeat."""
    try:
        return float(text)
    except ValueError:
        pass
    if _MIDNIGHT.fullmatch(text):  # a timestamp at midnight written as text (a CSV cell) reads as its date
        return text[:10]
    return text.lower() if text.lower() in ("true", "false") else text


def _nested(cell: Any) -> Any:
    """A list, struct or array's items in their comparable forms (for `_value`'s JSON)."""
    if hasattr(cell, "tolist") and getattr(cell, "ndim", 0):
        cell = cell.tolist()
    if isinstance(cell, dict):
        return {str(k): _nested(v) for k, v in cell.items()}
    if isinstance(cell, (list, tuple)):
        return [_nested(v) for v in cell]
    return _value(cell)


def _agree(actual: Any, expected: Any, tolerance: Tolerance) -> bool:
    a, e = _value(actual), _value(expected)
    if a is None or e is None:
        return a is None and e is None
    if isinstance(a, float) and isinstance(e, float):
        return abs(a - e) <= tolerance.abs_tol + tolerance.rel_tol * abs(e)
    return str(a) == str(e)


def row_share(
    actual: Mapping[str, Any], expected: Mapping[str, Any], tolerances: Mapping[str, Tolerance]
) -> float:
    """A row's score: the share of the expected row's columns that `actual` has and agrees on (1.0 for none)."""
    if not expected:
        return 1.0
    agree = sum(
        c in actual and _agree(actual[c], v, tolerances.get(c, Tolerance())) for c, v in expected.items()
    )
    return agree / len(expected)


def value_text(value: Any) -> str:
    """A key value as instance ids read it: its comparable text, ``7`` and not ``7.0``."""
    return str(_value(value)).removesuffix(".0")


def key_text(record: Mapping[str, Any], keys: Sequence[str]) -> str:
    """A row's key as instance ids read it: each key column's `value_text`, joined by ``|`` when the key has
    several columns."""
    return "|".join(value_text(record[key]) for key in keys)


def _keyed(
    frame: pd.DataFrame, keys: Sequence[str], what: str
) -> tuple[dict[str, dict[str, Any]], set[str], int]:
    """Key text -> row, the keys seen more than once, and how many rows repeated a key."""
    lacking = [key for key in keys if key not in frame.columns]
    if lacking:
        raise ValueError(
            f"{what} rows have no key column {lacking[0]!r} (columns: {', '.join(map(str, frame.columns))})"
        )
    rows: dict[str, dict[str, Any]] = {}
    repeated: set[str] = set()
    again = 0
    for record in frame.to_dict(orient="records"):
        name = key_text(record, keys)
        if name in rows:
            repeated.add(name)
            again += 1
        rows[name] = record
    return rows, repeated, again


def compare_rows(
    actual: pd.DataFrame,
    expected: pd.DataFrame,
    key: str | Sequence[str],
    columns: Sequence[str],
    tolerances: Mapping[str, Tolerance] | None = None,
) -> ModelScore:
    """Score `actual` against `expected` on `columns`, matching rows by `key` (one column or several; see the
    module docstring). A key that appears twice in `actual` never matches, and its repeats count as rows that
    should not be there; a compared column `actual` lacks fails every row."""
    tolerances = tolerances or {}
    keys = (key,) if isinstance(key, str) else tuple(key)
    got, repeated, again = _keyed(actual, keys, "actual")
    want, _, _ = _keyed(expected, keys, "expected")
    matched = 0
    wrong: dict[str, tuple[str, ...]] = {}
    for name, row in want.items():
        if name not in got:
            continue
        if name in repeated:
            wrong[name] = ("(repeated key)",)
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
        unexpected=tuple(sorted(set(got) - set(want))) + tuple(f"(repeat {i + 1})" for i in range(again)),
        wrong=wrong,
        columns=len(columns) + len(keys),  # a row's key columns count among its columns (they agree)
    )
