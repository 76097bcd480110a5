"""A run's progress where a second process can read it while the run holds its DuckDB file.

DuckDB 2.0 lets one process open a database file for writing, and then no other process may open it at all, not
even read-only (`IO Error: Could not set lock on file ...`). So `coco-sql status` from a second terminal could not
see a run that `coco-sql evolve` was writing (issue 40). The writer mirrors its progress into a small second
database file beside the store, `<db>.progress.duckdb`, which it opens only for the few milliseconds of each
update; a reader (`coco-sql watch`, `coco-sql status` when the store is busy) opens it read-only for as long
as one query. Each side retries while the other holds the lock, the writer for at most `WRITE_WAIT_S` (a missed
update is made good by the next: every update rewrites the run's row whole).

The mirror is a view for people, never an input: nothing reads it back into a run, and the store stays the
source of truth. A reader never opens the store while the mirror says a live process is writing it: a reader's
read-only open takes a lock too, and a writer that reopens its store at that moment would fail. Before the
writer knows its run's id, its row is run 0, `starting`. Two tables:

    progress        one row per run: run_id, task, phase (starting, evolving, finished, stopped, failed),
                    iteration, budget, best_val, message, pid (the writer's process), updated_at
    progress_lines  every progress line in order: run_id, seq, line, written_at
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import duckdb

SUFFIX = ".progress.duckdb"
WRITE_WAIT_S = 2.0
READ_WAIT_S = 5.0
_RETRY_S = 0.05
DONE = ("finished", "stopped", "failed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS progress (run_id BIGINT PRIMARY KEY, task VARCHAR, phase VARCHAR, iteration INTEGER,
    budget INTEGER, best_val DOUBLE, message VARCHAR, pid INTEGER, updated_at TIMESTAMP);
CREATE TABLE IF NOT EXISTS progress_lines (run_id BIGINT, seq INTEGER, line VARCHAR, written_at TIMESTAMP);
"""

T = TypeVar("T")


def mirror_path(db: str | Path) -> Path:
    """Where the progress of the store `db` is mirrored."""
    path = Path(db)
    return path.with_name(path.name + SUFFIX)


def _locked(error: Exception) -> bool:
    return "lock" in str(error).lower()


def _retry(action: Callable[[], T], wait_s: float) -> T | None:
    """`action()`, tried again while another process holds the file's lock, for at most `wait_s` (then None);
    any other error is raised."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return action()
        except duckdb.Error as error:
            if not _locked(error):
                raise
            if time.monotonic() >= deadline:
                return None
            time.sleep(_RETRY_S)


@dataclass
class ProgressMirror:
    """The writer's side: `update` rewrites the run's row and appends its line, one short connection each."""

    db: str | Path
    run_id: int
    task: str = ""
    budget: int | None = None
    missed: int = 0  # updates given up on while a reader held the lock (the next update makes them good)
    error: str | None = None  # the last error that kept an update out (a full disk, say): the run goes on
    _seq: int = 0
    _started: bool = False  # a `starting` row of run 0 was written, to be replaced by the run's own

    @property
    def path(self) -> Path:
        return mirror_path(self.db)

    def update(
        self, phase: str, message: str, *, iteration: int | None = None, best_val: float | None = None,
        budget: int | None = None, line: bool = True,
    ) -> None:  # fmt: skip
        """The run's state now; `line`: also append `message` to its lines."""
        self.budget = budget if budget is not None else self.budget
        now = datetime.now(UTC).replace(tzinfo=None)
        row = (self.run_id, self.task, phase, iteration, self.budget, best_val, message, os.getpid(), now)
        seq = self._seq

        replaces = self._started and self.run_id != 0

        def write() -> bool:
            with duckdb.connect(str(self.path)) as con:
                con.execute(_SCHEMA)
                if replaces:
                    con.execute("DELETE FROM progress WHERE run_id = 0")
                con.execute("INSERT OR REPLACE INTO progress VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
                if line:
                    con.execute(
                        "INSERT INTO progress_lines VALUES (?, ?, ?, ?)", (self.run_id, seq, message, now)
                    )
            return True

        try:
            written = _retry(write, WRITE_WAIT_S)
        except (duckdb.Error, OSError) as error:  # the mirror is for people: it never stops the run
            written, self.error = None, " ".join(str(error).split())
        if written is None:
            self.missed += 1
            return
        self._started = self.run_id == 0 or (self._started and not replaces)
        if line:
            self._seq += 1


@dataclass(frozen=True)
class Snapshot:
    """What the mirror holds: each run's row (newest run first) and the lines after `since` of the newest."""

    runs: list[dict[str, Any]]
    lines: list[tuple[int, str]]  # (seq, line)

    @property
    def latest(self) -> dict[str, Any] | None:
        return self.runs[0] if self.runs else None


def read_mirror(db: str | Path, since: int = -1, wait_s: float = READ_WAIT_S) -> Snapshot | None:
    """The mirror of store `db`, or None when there is none (no run was started by `coco-sql evolve` on it) or
    it stayed locked for `wait_s`."""
    path = mirror_path(db)
    if not path.exists():
        return None

    def read() -> Snapshot:
        with duckdb.connect(str(path), read_only=True) as con:
            tables = con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'progress'"
            ).fetchone()
            if not tables or not tables[0]:  # its writer has not created the tables yet
                return Snapshot([], [])
            cursor = con.execute("SELECT * FROM progress ORDER BY updated_at DESC, run_id DESC")
            names = [d[0] for d in cursor.description]
            runs = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            lines: list[tuple[int, str]] = []
            if runs:
                lines = con.execute(
                    "SELECT seq, line FROM progress_lines WHERE run_id = ? AND seq > ? ORDER BY seq",
                    (runs[0]["run_id"], since),
                ).fetchall()
            return Snapshot(runs, lines)

    try:
        return _retry(read, wait_s)
    except duckdb.Error:  # not a mirror this version wrote: nothing to show
        return None


def writing(snapshot: Snapshot | None) -> bool:
    """Whether the mirror says a live process is writing the store now (then no reader may open the store)."""
    run = None if snapshot is None else snapshot.latest
    return run is not None and run["phase"] not in DONE and writer_alive(run)


def writer_alive(row: dict[str, Any]) -> bool:
    """Whether the process that wrote `row` still runs (on this machine)."""
    try:
        os.kill(int(row["pid"]), 0)
    except (OSError, TypeError, ValueError):
        return False
    return True
