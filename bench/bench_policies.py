"""Policy and ablation benchmark: arms x seeds on one task with a matched budget (CoCoEvolve Appendix D).

Each arm is a RunConfig variation; every run gets the same task, budget and draft allowance. The table reports
the champion's validation and test scores, the first iteration at which the best validation score reached
--target, and the evaluations spent (drafts tested on training rows plus the children's own evaluations).

    python bench/bench_policies.py --task lockpicking6 --budget 60 --seeds 1,2,3,4,5 \
        --arms lp_roster,map_elites,best,pareto,parent_local
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

ARMS: dict[str, dict[str, Any]] = {
    "lp_roster": {"policy": "lp_roster"},
    "map_elites": {"policy": "map_elites"},
    "best": {"policy": "best"},
    "pareto": {"policy": "pareto"},
    "rare_capability": {"policy": "rare_capability"},
    "parent_local": {"policy": "lp_roster", "history": False},
    "uniform_targets": {"policy": "lp_roster", "targeting": "uniform"},
    "no_probe": {"policy": "lp_roster", "mutator_settings": {"probe": False}},
}


def run_one(task_name: str, arm: str, seed: int, budget: int, target: float) -> dict[str, Any]:
    from coco_sql import api
    from coco_sql.engines.duckdb.store import DuckDBStore

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, DuckDBStore(Path(tmp) / "bench.duckdb") as store:
        summary = api.evolve(task_name, db=store, budget=budget, options={"seed": seed, **ARMS[arm]})
        reached = store.query(
            "SELECT MIN(iteration) FROM leaderboard WHERE run_id = ? AND val_score >= ?",
            [summary.run_id, target],
        ).iloc[0, 0]
        drafts = store.query(
            "SELECT COALESCE(SUM(CAST(payload->>'drafts_tested' AS BIGINT)), 0) FROM events "
            "WHERE run_id = ? AND kind = 'mutation'",
            [summary.run_id],
        ).iloc[0, 0]
    return {
        "arm": arm,
        "seed": seed,
        "val": summary.champion_val_score,
        "test": summary.champion_test_score,
        "reached": None if pd.isna(reached) else int(reached),
        "evaluations": int(drafts) + 2 * budget,
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="lockpicking6")
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--arms", default="lp_roster,map_elites,best,pareto,parent_local")
    parser.add_argument(
        "--target", type=float, default=0.6, help="validation score for 'iterations to target'"
    )
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    arms = args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"unknown arms {unknown}; known: {', '.join(ARMS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = [(args.task, arm, seed, args.budget, args.target) for arm in arms for seed in seeds]
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(run_one, *zip(*jobs, strict=True)))
    print(f"task {args.task}, budget {args.budget}, seeds {args.seeds}, target val >= {args.target}")
    print(
        "| arm | val (median, per seed) | test (median, per seed) | iterations to target | evaluations | s/run |"
    )
    print("|---|---|---|---|---|---|")
    for arm in arms:
        rows = [r for r in results if r["arm"] == arm]
        vals = [r["val"] for r in rows]
        tests = [r["test"] for r in rows]
        reached = [r["reached"] for r in rows]
        hit = sorted(x for x in reached if x is not None)
        reach = (
            f"median {statistics.median(hit):g} ({len(hit)}/{len(rows)} reached)" if hit else f"0/{len(rows)}"
        )
        print(
            f"| {arm} | {statistics.median(vals):.2f} ({', '.join(f'{v:.2f}' for v in vals)}) "
            f"| {statistics.median(tests):.3f} ({', '.join(f'{t:.3f}' for t in tests)}) | {reach} "
            f"| {statistics.median(r['evaluations'] for r in rows):.0f} "
            f"| {statistics.median(r['seconds'] for r in rows):.0f} |"
        )


if __name__ == "__main__":
    main()
