"""PACE primitives on vs off: the same task, budget and seeds, with `primitives` the only difference.

For each task and arm it reports the median and the spread (min..max) over the seeds of the champion's
validation and test scores, and for tsp_construct also the champion's mean tour length at n = 50, 200 and 500
on the test split (the n = 200 and 500 columns are PACE's zero-shot scale transfer). With primitives on it also
reports how many primitives the run discovered and how many trials verified their contract and improved.

    python bench/bench_primitives.py --tasks lockpicking6 --budget 20 --seeds 1,2,3,4,5
    python bench/bench_primitives.py --tasks tsp_construct --budget 20 --seeds 1,2,3,4,5 --jobs 1

Runs go in separate processes (`--jobs` at a time), each into its own DuckDB file.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

TOUR_SQL = """
SELECT TRY_CAST(split_part(instance_id, '_', 1)[2:] AS INTEGER) AS n, avg(TRY_CAST(output AS DOUBLE))
FROM evaluations WHERE run_id = ? AND program_id = ? AND split = 'test' AND instance_id SIMILAR TO 'n[0-9]+_.*'
GROUP BY ALL ORDER BY n
"""


def run_one(task: str, primitives: bool, seed: int, budget: int) -> dict[str, Any]:
    from coco_sql import api
    from coco_sql.engines.duckdb.store import DuckDBStore

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, DuckDBStore(Path(tmp) / "bench.duckdb") as store:
        summary = api.evolve(task, db=store, budget=budget, options={"seed": seed, "primitives": primitives})
        tours = dict(store.query(TOUR_SQL, [summary.run_id, summary.champion_id]).itertuples(index=False))
        found = store.query("SELECT count(*) FROM primitives WHERE run_id = ?", [summary.run_id]).iloc[0, 0]
        trials = store.query(
            "SELECT count(*), count(*) FILTER (verified), count(*) FILTER (verified AND improved) "
            "FROM primitive_trials WHERE run_id = ?",
            [summary.run_id],
        ).iloc[0]
    return {
        "task": task,
        "arm": "on" if primitives else "off",
        "seed": seed,
        "val": summary.champion_val_score,
        "test": summary.champion_test_score,
        "tours": {int(n): float(v) for n, v in tours.items()},
        "primitives": int(found),
        "trials": tuple(int(x) for x in trials),
        "seconds": time.perf_counter() - started,
    }


def spread(values: list[float], digits: int = 3) -> str:
    """median [min..max]; runs without a value (a test evaluation that failed) are counted apart."""
    kept = [v for v in values if v == v]  # NaN: the run's test evaluation produced no tour
    if not kept:
        return "-"
    missing = f" ({len(values) - len(kept)} failed)" if len(kept) < len(values) else ""
    return f"{statistics.median(kept):.{digits}f} [{min(kept):.{digits}f}..{max(kept):.{digits}f}]{missing}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="lockpicking6")
    parser.add_argument("--budget", type=int, default=20)
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = [(task, arm, seed) for task in args.tasks.split(",") for arm in (False, True) for seed in seeds]
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_one, task, arm, seed, args.budget) for task, arm, seed in jobs]
        results = [f.result() for f in futures]
    for r in results:
        print(f"{r['task']:>14} {r['arm']:>3} seed {r['seed']}: val {r['val']:.3f} test {r['test']:.3f} "
              f"tours {r['tours'] or '-'} primitives {r['primitives']} trials {r['trials']} "
              f"({r['seconds']:.0f} s)", flush=True)  # fmt: skip
    print(f"\nbudget {args.budget}, seeds {args.seeds}: median [min..max]")
    print(f"{'task':>14} | {'arm':>3} | {'val':>21} | {'test':>21} | tour length n=50 / 200 / 500 | prim | trials "
          "(all / verified / improved)")  # fmt: skip
    for task in args.tasks.split(","):
        for arm in ("off", "on"):
            rows = [r for r in results if r["task"] == task and r["arm"] == arm]
            tours = " / ".join(
                spread([r["tours"][n] for r in rows if n in r["tours"]]) for n in (50, 200, 500)
            )
            trials = [sum(r["trials"][i] for r in rows) for i in range(3)]
            print(f"{task:>14} | {arm:>3} | {spread([r['val'] for r in rows]):>21} | "
                  f"{spread([r['test'] for r in rows]):>21} | {tours if rows[0]['tours'] else '-'} | "
                  f"{statistics.median(r['primitives'] for r in rows):>4.0f} | {trials}")  # fmt: skip


if __name__ == "__main__":
    main()
