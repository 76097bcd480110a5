"""The history query tools (CoCoEvolve Table 6) on a large store: warm latency of every tool, and one CLI call.

Builds the store of bench/bench_loop_overhead.py (one lockpicking6 run with 10,000 programs and 1,000,000
evaluation rows: 10,000 programs x 2 splits x 50 rows), then calls every tool of `HistoryTools` ~20 times through
the Python API (after one warm-up call) and prints the median and max per tool; the target is <= 50 ms each.
Finally times one `coco-sql history` call in a fresh process (start-up included).

    python bench/bench_history.py [--programs 10000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_loop_overhead import populate

from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.reflect.history import HistoryTools

TARGET_MS = 50.0


def calls(programs: int) -> dict[str, dict[str, Any]]:
    """One representative argument set per tool: a program in the middle of the run, a training row."""
    program = f"1-{programs // 2}"
    return {
        "get_program": {"program_id": program},
        "get_parent": {"program_id": program},
        "get_lineage": {"program_id": program},
        "get_best_programs": {},
        "get_diverse_programs": {},
        "get_architecture_history": {"cell": "3:4"},
        "get_recent_scores": {},
        "get_thinking_trace": {"iteration": programs // 2},
        "get_question_solvers": {"instance_id": "lp007"},
        "get_question_memory": {"instance_id": "lp007"},
        "get_suggested_questions": {"program_id": program},
        "get_hard_questions": {},
        "get_primitives": {},  # an empty library here (no primitives in the populated run)
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        started = time.perf_counter()
        populate(db, args.programs)
        print(f"populate: {time.perf_counter() - started:.1f} s")
        rows: list[tuple[str, float, float, int]] = []
        with DuckDBStore(db, read_only=True) as store:
            tools = HistoryTools(store, 1)
            assert set(calls(args.programs)) == set(HistoryTools.TOOLS)
            for tool, kwargs in calls(args.programs).items():
                result = tools.call(tool, **kwargs)  # warm-up
                times = []
                for _ in range(args.repeat):
                    clock = time.perf_counter()
                    tools.call(tool, **kwargs)
                    times.append((time.perf_counter() - clock) * 1000)
                size = len(result) if isinstance(result, list) else 1
                rows.append((tool, statistics.median(times), max(times), size))
        clock = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "coco_sql.cli", "history", "get_best_programs", "--db", str(db)],
            capture_output=True,
            text=True,
            check=True,
        )
        cli_ms = (time.perf_counter() - clock) * 1000
        assert done.stdout.lstrip().startswith("[")
    print(f"\n{'tool':<26} {'median ms':>10} {'max ms':>8} {'rows':>6}  (target <= {TARGET_MS:.0f} ms)")
    for tool, median, worst, size in rows:
        flag = "" if median <= TARGET_MS else "  OVER TARGET"
        print(f"{tool:<26} {median:>10.2f} {worst:>8.2f} {size:>6}{flag}")
    print(
        f"\none CLI call (`coco-sql history get_best_programs`, process start-up included): {cli_ms:.0f} ms"
    )


if __name__ == "__main__":
    main()
