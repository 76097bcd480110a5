"""`coco-sql watch`: follow a run from another terminal while `coco-sql evolve` holds the database file.

It reads the progress the run mirrors beside the store (`progress_mirror`): the lines the run
prints, as they come, until the run finishes, stops or fails, or its process is gone. `coco-sql status` reads
the same mirror when the store itself is busy (`status_from_mirror`).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from typing import Any

from coco_sql.cli_common import db_flag
from coco_sql.cli_help import add_db, command
from coco_sql.progress import fit, terminal_width

TAIL = 10  # lines shown of what happened before the watch started


def add_parser(commands: argparse._SubParsersAction) -> None:
    watch = command(
        commands, "watch", "follow a running run's progress from another terminal",
        "Prints the run's progress lines as they come, until it finishes. Works while `coco-sql evolve` or "
        "`resume` holds the database file: the run mirrors its progress beside it, in PATH.progress.duckdb.",
    )  # fmt: skip
    add_db(watch)
    watch.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between looks")
    watch.add_argument(
        "--once", action="store_true", help="print where the run is and the last lines, and stop"
    )
    watch.set_defaults(handler=cmd_watch)


def cmd_watch(args: argparse.Namespace) -> int:
    from coco_sql.progress_mirror import DONE, read_mirror, writer_alive, writing

    width = terminal_width(sys.stdout)
    snapshot = read_mirror(args.db)
    said = False
    while not args.once and writing(snapshot) and snapshot.latest["run_id"] == 0:  # type: ignore[union-attr]
        if not said:  # a run is starting: its seed is scored before its first line
            print(f"a run of {snapshot.latest['task'] or 'a task'} is starting in {args.db}: waiting for its "  # type: ignore[union-attr]
                  "first progress line (the seed is scored first)", flush=True)  # fmt: skip
            said = True
        time.sleep(max(args.interval, 0.05))
        snapshot = read_mirror(args.db)
    if snapshot is None or snapshot.latest is None:
        print(
            f"no run is reporting progress in {args.db} (coco-sql status {db_flag(args.db)} lists its runs)"
        )
        return 0
    run = snapshot.latest
    print(fit(_headline(run), width))
    shown = -1
    for seq, line in snapshot.lines[-TAIL:]:
        print(fit(line, width))
        shown = seq
    while not args.once and run["phase"] not in DONE:
        if not writer_alive(run):
            print(f"the process that ran run {run['run_id']} (pid {run['pid']}) is gone without finishing: "
                  f"coco-sql resume {db_flag(args.db)} --run {run['run_id']} continues it")  # fmt: skip
            return 1
        time.sleep(max(args.interval, 0.05))
        later = read_mirror(args.db, since=shown)
        if later is None or later.latest is None or later.latest["run_id"] != run["run_id"]:
            continue  # locked for a while, or a newer run started (the next look follows this one's end)
        run = later.latest
        for seq, line in later.lines:
            print(fit(line, width), flush=True)
            shown = seq
    return 0


def _headline(run: dict[str, Any]) -> str:
    where = "" if run["iteration"] is None else f", iteration {run['iteration']}/{run['budget']}"
    best = "" if run["best_val"] is None else f", best validation score {run['best_val']:.3f}"
    which = f"run {run['run_id']}" if run["run_id"] else "a new run"
    return f"{which} of {run['task'] or '?'}: {run['phase']}{where}{best} (updated {_ago(run)})"


def _ago(run: dict[str, Any]) -> str:
    seconds = (datetime.now(UTC).replace(tzinfo=None) - run["updated_at"]).total_seconds()
    return f"{max(seconds, 0):.0f} s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago"


def running_elsewhere(db: str) -> bool:
    """Whether the progress mirror says a live process is writing store `db` (then it must not be opened)."""
    from coco_sql.progress_mirror import read_mirror, writing

    return writing(read_mirror(db, since=1 << 30))


def status_from_mirror(db: str) -> None:
    """`coco-sql status` of a store another process holds: the runs its mirror knows."""
    from coco_sql.progress_mirror import read_mirror

    snapshot = read_mirror(db, since=1 << 30)
    print(
        f"{db} is open in another process (a run is writing it)"
        + ("; its progress mirror says:" if snapshot and snapshot.runs else ": no progress line yet")
    )
    for run in snapshot.runs if snapshot else []:
        print("  " + _headline(run))
    print(f"follow it with: coco-sql watch {db_flag(db)}")
