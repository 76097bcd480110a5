"""Two of the report's sections about what the data supports (issue 38), self-contained read models:

- "Likely label errors": the training rows the run flagged (`label_errors`, `search.label_noise`), each with its
  text, its label as given, what its nearest training rows hold instead, and the champion's answer;
- "Guards and their support": each keyword or similarity guard on the champion's lineage (the rules a person
  deploys with it), with the training rows it stands on and its significance test (`languages.sql.mutate.
  guard_rules`), as the mutator wrote them into the step's approach.
"""

from __future__ import annotations

import json
import re
from typing import Any

from coco_sql.store import Warehouse

GUARD = re.compile(
    r"^(?P<operator>keyword_guard|similarity_guard): (?P<rule>.*?) \((?P<rows>\d+) training rows, gain "
    r"(?P<gain>[-0-9.]+)(?:; (?P<support>[^)]*))?\)$"
)


def label_errors(store: Warehouse, run_id: int, champion_id: str | None) -> list[dict[str, Any]]:
    """The run's flagged rows, with the champion's answer on each (None where it has none)."""
    rows = store.report("label_errors", {"run_id": run_id, "program_id": champion_id or ""})
    return [
        {
            "instance_id": row["instance_id"],
            "text": row["text"],
            "label": _plain(row["label"]),
            "neighbours_label": row["neighbours_label"],
            "neighbour_share": float(row["neighbour_share"]),
            "answer": _plain(row["answer"]),
        }
        for row in rows
    ]


def guard_support(lineage: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The guards added along the champion's lineage (`page._lineage`'s steps), oldest first."""
    found = []
    for step in lineage:
        program = step.get("program") or {}
        match = GUARD.match(str(program.get("approach") or ""))
        if match is None:
            continue
        found.append(
            {
                "program_id": program.get("program_id"),
                "operator": match["operator"],
                "rule": match["rule"],
                "rows": int(match["rows"]),
                "gain": float(match["gain"]),
                "support": match["support"] or "support not recorded (a program written before issue 38)",
            }
        )
    return found


def _plain(cell: Any) -> str | None:
    """A JSON label or answer as text: a list joined by ', ', a string as it is."""
    if cell is None:
        return None
    try:
        value = json.loads(cell)
    except (TypeError, ValueError):
        return str(cell)
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


__all__ = ["guard_support", "label_errors"]
