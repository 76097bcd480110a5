"""coco-sql's search against the search Snowflake's AI-function optimizer makes (issue 38, item 5), in one harness.

For each pack (default: every text pack) and seed, one run with the offline mutator (coco-sql's own search) and
one with `prompt_only` (only the one AI call's prompt and configuration: `languages.sql.mutate.prompt_only`),
same budget, seed and store; per run: the champion's validation and test scores, its SQL size, and its deploy
cost per 1,000 rows (calls and tokens, from its validation rows, as `coco-sql cost` reports it), next to the
seed's. Per pack: the medians, and whether coco-sql's champion beats the prompt-only one by at least 3 points of
median test score at no more median deploy tokens (issue 38's Done-when).

`run_mutator` is the reusable part (bench/bench_generalisation.py may import it): one run of a mutator on a
pack, as a dict.

    nice -n 10 python bench/bench_aifo_baseline.py --packs goemotions,hotpotqa_type --seeds 1,2,3 --budget 30
    python bench/bench_aifo_baseline.py --packs hotpotqa_type --seeds 1 --budget 2   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MUTATORS = ("offline", "prompt_only")
MARGIN = 0.03  # the Done-when: at least 3 points of test score


def run_mutator(pack: str, seed: int, budget: int, mutator: str, db: Path | str) -> dict[str, Any]:
    """One run of `mutator` on `pack` (a name or directory) in the store `db` (shared between runs: its AI
    cache makes a second run's embeddings free; each run is billed as deployed all the same): the champion's
    scores, size and deploy cost per 1,000 rows, and the seed's cost."""
    from coco_sql import api
    from coco_sql.engine.deploy_cost import program_costs
    from coco_sql.engines.duckdb.store import DuckDBStore
    from coco_sql.report import read_models

    started = time.perf_counter()
    summary = api.evolve(pack, db=db, budget=budget, options={"seed": seed, "mutator": mutator})
    with DuckDBStore(db, read_only=True) as store:
        champion = read_models.champion(store, summary.run_id)
        costs = {p["program_id"]: p["deploy_cost"] for p in program_costs(store, summary.run_id)}
    seed_id = f"{summary.run_id}-0"
    own, first = costs.get(summary.champion_id), costs.get(seed_id)
    return {
        "pack": Path(pack).name,
        "mutator": mutator,
        "seed": seed,
        "run_id": summary.run_id,
        "iterations": summary.iterations,
        "seed_val": summary.seed_val_score,
        "seed_test": summary.seed_test_score,
        "val": summary.champion_val_score,
        "test": summary.champion_test_score,
        "champion": summary.champion_id,
        "sql_kb": round(len(champion.code.encode()) / 1024, 2),
        "tokens": None if own is None else round(own.tokens),
        "calls": None if own is None else round(own.calls),
        "seed_tokens": None if first is None else round(first.tokens),
        "seed_calls": None if first is None else round(first.calls),
        "seconds": round(time.perf_counter() - started, 1),
    }


def verdict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per pack: each mutator's medians, and coco-sql's margin over prompt_only (module docstring)."""
    medians: dict[str, dict[str, float]] = {}
    for mutator in MUTATORS:
        mine = [r for r in rows if r["mutator"] == mutator]
        if mine:
            medians[mutator] = {
                key: statistics.median(float(r[key] or 0) for r in mine)
                for key in ("test", "val", "tokens", "calls", "sql_kb", "seed_test", "seed_tokens")
            }
    if set(medians) != set(MUTATORS):
        return {"medians": medians}
    ours, theirs = medians["offline"], medians["prompt_only"]
    margin = ours["test"] - theirs["test"]
    return {
        "medians": medians,
        "test_margin": round(margin, 4),
        "token_ratio": round(ours["tokens"] / theirs["tokens"], 3) if theirs["tokens"] else None,
        "beats_by_3_points_at_no_more_cost": margin >= MARGIN and ours["tokens"] <= theirs["tokens"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packs", default="goemotions,hotpotqa_type")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--mutators", default=",".join(MUTATORS))
    parser.add_argument("--timeout", type=float, default=600.0, help="the packs' program deadline, seconds")
    parser.add_argument("--out", type=Path, default=None, help="write every run and the verdicts as JSON")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_ai_champions import with_timeout  # a loaded machine must not time out a cold seed

    results: list[dict[str, Any]] = []
    verdicts: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="aifo-bench-") as tmp:
        for name in args.packs.split(","):
            pack = with_timeout(name, args.timeout, Path(tmp))
            db = Path(tmp) / f"{name}.duckdb"
            rows = []
            for seed in (int(s) for s in args.seeds.split(",")):
                for mutator in args.mutators.split(","):
                    row = run_mutator(pack, seed, args.budget, mutator, db)
                    print(json.dumps(row), flush=True)
                    rows.append(row)
            verdicts[name] = verdict(rows)
            print(json.dumps({"pack": name, **verdicts[name]}), flush=True)
            results += rows
    if args.out is not None:
        args.out.write_text(json.dumps({"runs": results, "verdicts": verdicts}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
