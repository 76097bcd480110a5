"""Progress a person can read (issue 40): iteration lines that fit the terminal, a legend before the first line,
the next step after a run, and a second process that follows a running run with `coco-sql watch` and
`coco-sql status` while the run holds its DuckDB file."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coco_sql.cli_common import LEGEND, RunProgress, next_steps
from coco_sql.engine import IterationReport, RunSummary
from coco_sql.progress import fit
from coco_sql.progress_mirror import ProgressMirror, mirror_path, read_mirror, writing

ROOT = Path(__file__).resolve().parents[1]
LONG = "joint_fit: 12 rules fitted jointly to all training rows: " + "; ".join(
    f"p{i} = {i} -> CASE #{i},#{i + 1}" for i in range(1, 13)
)


def report(**changes: object) -> IterationReport:
    fields: dict[str, object] = dict(iteration=28, budget=60, program_id="1-28", parent_id="1-2", val_score=0.74,
                                     parent_score=0.7, admitted=True, approach=LONG, best_score=0.78)  # fmt: skip
    fields.update(changes)
    return IterationReport(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("width", [70, 90, 132])
def test_a_line_fits_the_width_and_cuts_at_a_word(width: int) -> None:
    line = report(exhausted=("1-1",)).line(width)
    assert len(line) <= width
    assert line.startswith("[ 28/60] 1-2 -> 1-28 val 0.740 + best 0.780  ")
    # the parent the mutator gave up on, and the parent it took instead, survive the cut
    assert line.endswith(
        "  (1-1 has nothing left to try: the parent is 1-2)" if width > 90 else "(1-1 exhausted)"
    )
    approach = line.split("  ")[1]
    assert approach.endswith("…") or approach == ""
    words = LONG.split()
    assert all(word in words for word in approach.rstrip("…").split())  # no word is cut in two


def test_a_log_keeps_the_whole_line_and_fit_cuts_at_words() -> None:
    assert report().line().endswith(LONG)  # no width: a log or coco_progress.message keeps it whole
    assert fit("alpha beta gamma", 12) == "alpha beta…"
    assert fit("alpha\n  beta", None) == "alpha beta"


def test_progress_says_what_a_line_means_once_and_ends_with_the_next_step(tmp_path: Path) -> None:
    stream = io.StringIO()
    progress = RunProgress(tmp_path / "r.duckdb", "lockpicking6", stream=stream)
    progress.starting()
    assert writing(
        read_mirror(tmp_path / "r.duckdb")
    )  # a watcher waits for this run instead of opening its store
    for t in range(3):
        progress(report(iteration=t, program_id=f"3-{t}", approach="x"))
    text = stream.getvalue()
    assert text.count("One line per iteration") == 1 and text.index("One line") < text.index("[  0/60]")
    assert "+ when it entered the archive" in LEGEND and "3-0 is the seed of run 3" in text
    summary = RunSummary(3, "lockpicking6", 2, "3-2", 0.02, 0.3, 0.03, 0.2, "3-2", 0.3, None)
    progress.finished(summary)
    snapshot = read_mirror(tmp_path / "r.duckdb")
    assert snapshot is not None and snapshot.latest is not None
    assert (snapshot.latest["run_id"], snapshot.latest["phase"]) == (3, "finished")
    assert [run["run_id"] for run in snapshot.runs] == [3]  # the starting row was replaced
    assert [line for _, line in snapshot.lines][:1] == [
        report(iteration=0, program_id="3-0", approach="x").line()
    ]
    steps = next_steps(summary, "runs/my runs.duckdb")
    assert steps[0].startswith("coco-sql report --db 'runs/my runs.duckdb' --out report.html")
    paused = RunSummary(3, "t", 2, "3-2", 0.0, 0.0, None, None, stopped="spend limit reached: ...")
    assert "--max-spend" in next_steps(paused, "a.duckdb")[0]


def test_a_reader_holding_the_mirror_delays_the_writer_without_losing_a_line(tmp_path: Path) -> None:
    import duckdb

    mirror = ProgressMirror(tmp_path / "r.duckdb", 1, "t")
    mirror.update("evolving", "line 0", iteration=0)
    reader = subprocess.Popen(  # another process holds the mirror for 0.5 s
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1], read_only=True); "
         "print('open', flush=True); time.sleep(0.5)", str(mirror_path(tmp_path / "r.duckdb"))],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
    mirror.update("evolving", "line 1", iteration=1)  # waits for the lock, then writes
    reader.wait(timeout=30)
    assert mirror.missed == 0 and mirror.error is None
    with duckdb.connect(str(mirror_path(tmp_path / "r.duckdb")), read_only=True) as con:
        assert con.execute("SELECT line FROM progress_lines ORDER BY seq").fetchall() == [
            ("line 0",),
            ("line 1",),
        ]


def _cli(*args: str | Path, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.Popen([sys.executable, "-m", "coco_sql.cli", *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_a_second_process_watches_a_running_run(tmp_path: Path) -> None:
    """A real `coco-sql evolve` in one process; `status` and `watch` in others while it holds the store."""
    db = tmp_path / "run.duckdb"
    run = _cli("evolve", "lockpicking6", "--budget", "3", "--seed", "1", "--max-drafts", "2", "--db", db,
               cwd=tmp_path)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not writing(read_mirror(db)) and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        status = subprocess.run([sys.executable, "-m", "coco_sql.cli", "status", "--db", str(db)], cwd=tmp_path,
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        watch = _cli("watch", "--db", db, "--interval", "0.2", cwd=tmp_path)
        watched, watch_err = watch.communicate(timeout=300)
        out, err = run.communicate(timeout=300)
    finally:
        run.kill()
    assert run.returncode == 0, err
    assert status.returncode == 0, status.stderr
    assert "is open in another process" in status.stdout and "coco-sql watch --db" in status.stdout
    assert watch.returncode == 0, watch_err
    printed = [line for line in err.splitlines() if line.startswith("[")]
    seen = [line for line in watched.splitlines() if line.startswith("[")]
    assert seen and seen[-1] == printed[-1]  # the watcher saw the run to its end (its last lines at least)
    assert "run 1 finished: champion" in watched.splitlines()[-1]
    assert "next: coco-sql report --db" in out
