"""What `coco-sql init dbt` infers when the user does not say: each target's key, the entity the splits
partition and the source tables that follow it, and how each target's rows are assigned to a split.

- **Key**: the columns a ``unique`` test (with ``not_null``) or ``dbt_utils.unique_combination_of_columns``
  names on the model, when they are unique and never empty in the expected rows; else the first column, or the
  first pair of columns, of the expected rows that is (id-like names first). The report says which.
- **Entity**: a source column with id-like name and at least `MIN_ENTITIES` values, chosen so that the most
  targets have a column whose values lie in it (then the most values). A target row belongs to the split of
  that column's value (`split_by`).
- **Follow**: a source table is cut with the entity when one of its columns references a cut table's column:
  the names agree (``customer_id`` -> ``customers.id`` or ``customer_id``), or the project's ``relationships``
  tests name the column, and its values lie in the parent's. Other tables are whole in every split.
- A target no entity reaches is scored on a partition of its own keys when it reads no cut table; one that
  aggregates over cut tables is refused (its expected rows hold every split's entities).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

MIN_ENTITIES = 20
CONTAINED = 0.98  # the share of a column's values that must lie in the entity's


@dataclass(frozen=True)
class Split:
    entity: str  # "source.table.column"
    follow: tuple[str, ...]  # "child.table.col -> parent.table.col"
    cut: frozenset[str]  # the tables each split holds a part of
    assigned: Mapping[str, tuple[str, str]]  # target -> (split_by column, key_of "source.table.column")


def idlike(name: str) -> bool:
    lowered = name.lower()
    return lowered == "id" or lowered.endswith(("_id", "id", "_key", "_sk", "_code"))


def datelike(name: str, series: pd.Series | None = None) -> bool:
    lowered = name.lower()
    if lowered in ("ds", "date", "day", "month", "week", "year") or lowered.endswith(
        ("_date", "_day", "_month", "_at")
    ):
        return True
    return series is not None and pd.api.types.is_datetime64_any_dtype(series)


def infer_key(frame: pd.DataFrame, named: Sequence[tuple[str, ...]]) -> tuple[tuple[str, ...], str]:
    """(key columns, how they were found) for a target's expected rows; ValueError when none is unique."""
    for columns in named:
        if all(c in frame.columns for c in columns) and _unique(frame, columns):
            return columns, f"from the project's tests ({' + '.join(columns)} unique and not null)"
    exact = [c for c in frame.columns if not pd.api.types.is_float_dtype(frame[c])]  # a float is no key
    ordered = sorted(
        exact, key=lambda c: (not idlike(str(c)), not datelike(str(c), frame[c]), exact.index(c))
    )
    for column in ordered:
        if _unique(frame, (column,)):
            return (str(column),), f"inferred: {column} is unique and never empty in the expected rows"
    for i, first in enumerate(ordered[:8]):
        for second in ordered[i + 1 : 8]:
            if _unique(frame, (first, second)):
                return (str(first), str(second)), (
                    f"inferred: {first} + {second} is unique and never empty in the expected rows"
                )
    raise ValueError("no column, and no pair of columns, is unique in the expected rows: give --key")


def _unique(frame: pd.DataFrame, columns: Sequence[str]) -> bool:
    part = frame[list(columns)]
    return len(frame) > 0 and not part.isna().any().any() and not part.duplicated().any()


def _values(series: pd.Series) -> set[str]:
    return {str(v).removesuffix(".0") for v in series.dropna().unique()}


def choose_split(tables: Mapping[str, pd.DataFrame], expected: Mapping[str, pd.DataFrame],
                 keys: Mapping[str, tuple[str, ...]], relationships: Sequence[tuple[str, str, str, str]],
                 entity: str | None = None) -> Split:  # fmt: skip
    """The entity, follow rules and each target's split column (module docstring); `entity` when given."""
    candidates = []
    for table, frame in tables.items():
        for column in frame.columns:
            name = f"{table}.{column}"
            if entity is not None and name != entity:
                continue
            values = _values(frame[column])
            eligible = idlike(str(column)) or datelike(str(column), frame[column])
            if entity is None and (not eligible or len(values) < MIN_ENTITIES):
                continue
            assigned = _assigned(expected, keys, values, f"{table}.{column}")
            candidates.append((len(assigned), frame[column].is_unique, len(values), name, assigned))
    if not candidates:
        raise ValueError(f"no source column named {entity!r}" if entity else "no source column can be the entity "
                         f"(an id-like column with at least {MIN_ENTITIES} values): give --entity")  # fmt: skip
    _, _, _, chosen, assigned = max(candidates, key=lambda c: c[:3])
    table = chosen.rsplit(".", 1)[0]
    follow, cut = _follow(tables, table, chosen, relationships)
    for target, (split_by, _) in list(assigned.items()):  # a target row may be owned by a followed table too
        assigned[target] = (split_by, chosen)
    return Split(chosen, tuple(follow), frozenset(cut), assigned)


def _assigned(expected: Mapping[str, pd.DataFrame], keys: Mapping[str, tuple[str, ...]], values: set[str],
              key_of: str) -> dict[str, tuple[str, str]]:  # fmt: skip
    """Targets with a column that names the entity (`_same`) and whose values lie in its values."""
    found = {}
    table, entity = key_of.rsplit(".", 1)
    for target, frame in expected.items():
        order = list(keys.get(target, ())) + [c for c in frame.columns if idlike(str(c)) or datelike(str(c))]
        for column in dict.fromkeys(order):
            if not _same(str(column), table, entity):
                continue
            mine = _values(frame[column])
            if mine and len(mine & values) >= CONTAINED * len(mine):
                found[target] = (str(column), key_of)
                break
    return found


def _same(column: str, table: str, entity: str) -> bool:
    """`column` names the entity `table.entity`: the same name (not a bare ``id``), ``customer_id`` for
    ``customers.id``, or both dates."""
    a, b = column.lower(), entity.lower()
    stem = table.rsplit(".", 1)[-1].lower().removesuffix("s")
    return (
        (a == b and a != "id")
        or (b == "id" and a in (f"{stem}_id", f"{stem}id"))
        or (datelike(a) and datelike(b))
    )


def _follow(tables: Mapping[str, pd.DataFrame], root: str, entity: str,
            relationships: Sequence[tuple[str, str, str, str]]) -> tuple[list[str], set[str]]:  # fmt: skip
    """Follow rules from the entity's table outwards (module docstring), parents before children."""
    cut, follow = {root}, []
    parents = [(root, entity.rsplit(".", 1)[1])]
    told = {(m, c) for m, c, _, _ in relationships}  # columns the project's tests say reference another table
    while parents:
        parent, column = parents.pop(0)
        stem = parent.rsplit(".", 1)[1].lower().removesuffix("s")
        parent_values = _values(tables[parent][column])
        for table, frame in tables.items():
            if table in cut:
                continue
            for child in frame.columns:
                lowered = str(child).lower()
                named = (lowered == column.lower() and lowered != "id") or (
                    column.lower() == "id" and lowered in (f"{stem}_id", f"{stem}id")
                )
                if not (named or (table.rsplit(".", 1)[1], str(child)) in told):
                    continue
                values = _values(frame[child])
                if values and len(values & parent_values) >= CONTAINED * len(values):
                    follow.append(f"{table}.{child} -> {parent}.{column}")
                    cut.add(table)
                    ids = [
                        c
                        for c in frame.columns
                        if str(c).lower() == "id" or (frame[c].is_unique and idlike(str(c)))
                    ]
                    parents += [(table, str(i)) for i in ids[:1]]
                    break
    return follow, cut
