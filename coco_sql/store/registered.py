"""A task registered from warehouse rows, as the stores keep it (`tasks`, `task_rows`), shared by both stores.

`task_rows` holds the source's rows at positions 0 .. n_rows - 1 (`tasks.n_rows`) and, for a task with option
`test_source`, the test rows after them: one table, one write, and a store registered before test_source reads
back exactly as before (no position past n_rows). Each row is its JSON object, the source's columns by name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from coco_sql.errors import StoreError


@dataclass(frozen=True)
class RegisteredTask:
    """What `coco_task` stored: its source (text), options, the source's column types, its rows, and the rows of
    `test_source` (None without one)."""

    source: str
    options: dict[str, Any]
    types: dict[str, str]
    rows: pd.DataFrame
    test_rows: pd.DataFrame | None = None

    @classmethod
    def from_stored(
        cls, source: str, options: dict[str, Any], types: dict[str, str], n_rows: int, data: Iterable[Any]
    ) -> RegisteredTask:
        """From the `tasks` row and the `task_rows` JSON objects in position order."""
        records = [json.loads(r) if isinstance(r, str) else r for r in data]
        frame = pd.DataFrame(records, columns=list(types))
        test = frame.iloc[n_rows:].reset_index(drop=True) if len(frame) > n_rows else None
        return cls(source, options, types, frame.iloc[:n_rows].reset_index(drop=True), test)


def stored_rows(rows: pd.DataFrame, test_rows: pd.DataFrame | None) -> pd.DataFrame:
    """The frame a store writes to `task_rows`: the source's rows, then the test rows in the source's columns
    (a column the test source lacks is NULL; the task reads only the id, input and label columns)."""
    if test_rows is None:
        return rows
    return pd.concat([rows, test_rows.reindex(columns=rows.columns)], ignore_index=True)


def refuse_reuse(name: str, run_ids: Iterable[Any]) -> None:
    """A task whose rows a run has used keeps them: re-registering it would change what that run evolved on
    (its resume and its report). One line naming the runs and what to do instead."""
    used = sorted(int(r) for r in run_ids)
    if used:
        runs = ", ".join(map(str, used[:5])) + (", ..." if len(used) > 5 else "")
        raise StoreError(
            f"task {name!r} already has runs ({runs}) over the rows it was registered with; register the new "
            f"rows under another name, e.g. CALL coco_task('{name}_2', ...)"
        )
