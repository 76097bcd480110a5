"""Progress of a run started from SQL: the `coco_progress` table, rewritten as the run goes, and a line on stderr.

Why (issue 26): `CALL coco_evolve(...)` printed nothing, and an analyst's first run was silent for 18.7 minutes
(most of it the cold embedding of 1,100 texts). A procedure returns its rows only at its end, so the run reports
where a client can look while it goes:

- `coco_progress`, one row per run (`sql/schema.sql`), replaced and committed at each step: the start, each
  chunk of a cold embedding (`phase = 'warming'`, `done` of `total` texts), each committed iteration
  (`phase = 'evolving'`, the iteration, the best validation score, the iteration's progress line), and the end
  (`finished`, `stopped` with why, or `failed` with the one-line error). A call refused before its run reports
  anything (a bad option) writes no row; a start that fails later keeps its row as `failed` but writes no run,
  and the next run, which takes its id, replaces the row. Another connection reads it while the run
  goes: in DuckDB a second connection or cursor in the same process (a thread; README "From SQL"): a second
  process cannot open a database file that a writer holds (DuckDB's file lock); in Snowflake another session.
- the iteration's progress line (`IterationReport.line`, what `coco-sql evolve` prints) on this process's stderr,
  where a notebook, a Python shell or `coco-sql sql` shows it.

Engine-neutral: the board writes through the store (`Warehouse.set_progress`).
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from coco_sql.engine import IterationReport, RunSummary
from coco_sql.store import Warehouse


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass
class ProgressBoard:
    """The progress row of run `run_id` of `task`, and the stderr line. `iteration` and `long_operation` are the
    callbacks `api.evolve`/`api.resume` (progress) and the AI runtime (`AiConfig.progress`) are handed."""

    store: Warehouse
    run_id: int
    task: str
    budget: int | None
    stream: TextIO | None = field(default_factory=lambda: sys.stderr)
    _row: dict[str, Any] = field(init=False)
    _written: bool = field(init=False)

    def __post_init__(self) -> None:
        now = _now()
        self._row = {
            "run_id": self.run_id, "task": self.task, "phase": "starting", "iteration": None,
            "budget": self.budget, "best_val": None, "done": None, "total": None,
            "message": f"starting run {self.run_id} of task {self.task}", "started_at": now, "updated_at": now,
        }  # fmt: skip
        self._written = False  # nothing is written for a call refused before its run reports anything

    def iteration(self, report: IterationReport) -> None:
        """One committed iteration (0: the seed)."""
        self._set(
            phase="evolving",
            iteration=report.iteration,
            budget=report.budget,
            best_val=report.best_score,
            done=None,
            total=None,
            message=report.line(),
        )
        self._say(report.line())

    def long_operation(self, what: str, done: int, total: int) -> None:
        """A long operation's step (the cold embedding of many texts)."""
        phase = "warming" if self._row["iteration"] is None else self._row["phase"]
        self._set(phase=phase, done=done, total=total, message=f"{what}: {done:,}/{total:,}")
        if done >= total:
            self._say(f"{what}: {total:,}/{total:,}")

    def finished(self, summary: RunSummary) -> None:
        """The run returned: finished, or stopped early (its `stopped` says why)."""
        message = summary.stopped or (
            f"run {summary.run_id} finished: champion {summary.champion_id}, val "
            f"{summary.champion_val_score:.4f}"
        )
        self._set(
            phase="stopped" if summary.stopped else "finished",
            iteration=summary.iterations,
            best_val=summary.champion_val_score,
            done=None,
            total=None,
            message=message,
        )

    def failed(self, error: BaseException) -> None:
        """The call failed: its one-line message (best effort: the error itself is what the caller gets)."""
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if self._written:
            with contextlib.suppress(Exception):  # the run's own error wins
                self._set(phase="failed", message=message[:1000])

    def _set(self, **values: Any) -> None:
        self._row.update(values, updated_at=_now())
        self._write()

    def _write(self) -> None:
        self.store.set_progress(dict(self._row))
        self._written = True

    def _say(self, line: str) -> None:
        if self.stream is not None:
            print(line, file=self.stream, flush=True)
