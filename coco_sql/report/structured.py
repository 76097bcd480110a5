"""Mismatches of a program whose outputs are records, not labels (a dbt project's target rows): per part (the
model, the instance id's prefix before `:`) how many rows match, are missing or differ, and per
column on how many of the rows that differ it is wrong. Data tests (`test:KIND:MODEL.COLUMN`) count under their
model as passed or failed. Pure functions over the evaluation rows (`read_models.split_rows`); no kind is
imported: a record is any output whose JSON is an object (or JSON text of one).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

MATCH = 1.0 - 1e-9
MAX_COLUMNS = 12  # per part, the columns wrong most often


def mismatches(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Per-part and per-column mismatches, or None when no row's expected value is a record."""
    parts: dict[str, dict[str, Any]] = {}
    records = 0
    for row in rows:
        instance = str(row["instance_id"])
        expected, output = _record(row["expected"]), _record(row["output"])
        if instance.startswith("test:"):
            _, kind, target = [*instance.split(":", 2), "", ""][:3]
            part = parts.setdefault(target.split(".")[0], _part())
            part["tests"] += 1
            if (row["score"] or 0.0) < MATCH:
                part["failed_tests"].append(f"{kind} on {target.split('.', 1)[-1]}")
            continue
        if expected is None:
            continue
        records += 1
        part = parts.setdefault(instance.split(":", 1)[0] if ":" in instance else "rows", _part())
        part["rows"] += 1
        if (row["score"] or 0.0) >= MATCH:
            part["matched"] += 1
        elif output is None:
            part["missing"] += 1
        else:
            part["differ"] += 1
            part["columns"].update(c for c in expected if not _same(expected.get(c), output.get(c)))
    if not records:
        return None
    return {
        "parts": [
            {**{k: v for k, v in p.items() if k != "columns"}, "name": name,
             "columns": p["columns"].most_common(MAX_COLUMNS)}
            for name, p in sorted(parts.items())
        ],
        "rows": records,
        "matched": sum(p["matched"] for p in parts.values()),
    }  # fmt: skip


def _part() -> dict[str, Any]:
    return {"rows": 0, "matched": 0, "missing": 0, "differ": 0, "columns": Counter(), "tests": 0,
            "failed_tests": []}  # fmt: skip


def _record(text: Any) -> dict[str, Any] | None:
    value: Any = text
    for _ in range(2):  # JSON text, possibly of JSON text
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b
