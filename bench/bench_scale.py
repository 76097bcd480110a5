"""Warehouse scale: seconds per iteration by phase, peak RSS and evaluation rows per iteration, by pool size.

Each size runs in a fresh child process (so peak RSS is that run's own), on a lockpicking-style pool drawn by the
pack's generator (`bench_screening.make_pack`), with the offline mutator, minibatches off and on:

    python bench/bench_scale.py                           # 5,000 rows, 5 iterations, minibatch off and 1,000
    python bench/bench_scale.py --size full               # 5,000 / 50,000 / 500,000 / 1,000,000 rows, 20 iterations
    python bench/bench_scale.py --rows 50000 --iterations 10 --minibatch 0 2000
    python bench/bench_scale.py --rows 200000 --iterations 4 --minibatch 1000 --profile /tmp/scale.prof

Reported per run: the median seconds per iteration after the seed and its phases (the loop's own timings), the
seed evaluation's wall time (included in the run's wall time), peak RSS of the run's largest process (the loop;
sandbox workers are separate processes and are reported apart), and the median evaluation rows stored per
iteration (train + val). `--fit` prints the exponent b of s/iteration ~ rows^b fitted over the sizes run with
minibatches off. `--profile FILE` runs one size and one minibatch setting in this process under cProfile instead
(the loop's thread only: the committer's store writes run in another), saves the stats to FILE and prints the
top 30 functions by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_screening import PHASES, make_pack

from coco_sql import api
from coco_sql.engine import IterationReport

FULL_ROWS = (5_000, 50_000, 500_000, 1_000_000)


def one_run(rows: int, iterations: int, seed: int, minibatch: int) -> dict[str, float]:
    """One run in this process (the child's side): its measurements as a dict."""
    reports: list[IterationReport] = []
    with tempfile.TemporaryDirectory() as tmp:
        pack = make_pack(Path(tmp), rows)
        db = Path(tmp) / "scale.duckdb"
        started = time.perf_counter()
        summary = api.evolve(
            str(pack),
            db=str(db),
            budget=iterations,
            options={"seed": seed, "minibatch": minibatch},
            progress=reports.append,
        )
        wall = time.perf_counter() - started
        with duckdb.connect(str(db), read_only=True) as con:
            per_program = [
                n
                for (n,) in con.execute(
                    "SELECT count(*) FROM evaluations WHERE split IN ('train', 'val') AND program_id <> '1-0' "
                    "GROUP BY program_id"
                ).fetchall()
            ]
    timed = [r for r in reports if r.timings_ms and r.iteration > 0]
    result = {p: statistics.median(r.timings_ms.get(p, 0.0) for r in timed) / 1000 for p in PHASES}
    result["iteration"] = (
        statistics.median(sum(r.timings_ms.get(p, 0.0) for p in PHASES) for r in timed) / 1000
    )
    result["wall"] = wall
    result["val"] = summary.champion_val_score
    result["eval_rows"] = statistics.median(per_program) if per_program else 0
    result["rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    result["workers_rss_gb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("small", "full"), default="small")
    parser.add_argument("--rows", type=int, nargs="+", help="pool sizes (default: 5000, or FULL_ROWS)")
    parser.add_argument("--iterations", type=int, help="iterations per run (default 5, or 20 at full size)")
    parser.add_argument("--minibatch", type=int, nargs="+", default=[0, 1000], help="rows; 0 is off")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run before it is stopped")
    parser.add_argument("--fit", action="store_true", help="fit s/iteration ~ rows^b (minibatch off)")
    parser.add_argument("--profile", metavar="FILE", help="cProfile one run in this process, stats to FILE")
    parser.add_argument(
        "--one", type=int, nargs=3, metavar=("ROWS", "ITERATIONS", "MINIBATCH"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_run(*args.one[:2], args.seed, args.one[2])))
        return
    rows_list = args.rows or (FULL_ROWS if args.size == "full" else (5_000,))
    iterations = args.iterations or (20 if args.size == "full" else 5)
    if args.profile:
        if len(rows_list) != 1 or len(args.minibatch) != 1:
            parser.error("--profile runs one size with one minibatch setting")
        profiler = cProfile.Profile()
        result = profiler.runcall(one_run, rows_list[0], iterations, args.seed, args.minibatch[0])
        profiler.dump_stats(args.profile)
        print(json.dumps(result))
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
        return
    print(f"{'rows':>9} | {'minibatch':>9} | {'s/iter':>7} | {'curate':>7} | {'mutate':>7} | {'evaluate':>8} | "
          f"{'wall s':>7} | {'val':>5} | {'eval rows/iter':>14} | peak RSS loop / worker")  # fmt: skip
    off: list[tuple[int, float]] = []
    for rows in rows_list:
        for minibatch in args.minibatch:
            command = [sys.executable, __file__, "--one", str(rows), str(iterations), str(minibatch),
                       "--seed", str(args.seed)]  # fmt: skip
            try:
                done = subprocess.run(
                    command, capture_output=True, text=True, timeout=args.timeout, check=False
                )
            except subprocess.TimeoutExpired:
                print(f"{rows:>9,} | {minibatch:>9,} | did not finish within {args.timeout:g} s", flush=True)
                continue
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["?"])[-1]
                print(f"{rows:>9,} | {minibatch:>9,} | failed ({done.returncode}): {last}", flush=True)
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            if minibatch == 0:
                off.append((rows, r["iteration"]))
            print(f"{rows:>9,} | {minibatch:>9,} | {r['iteration']:>7.2f} | {r['curate']:>7.2f} | {r['mutate']:>7.2f} | "
                  f"{r['evaluate']:>8.2f} | {r['wall']:>7.1f} | {r['val']:>5.3f} | {r['eval_rows']:>14,.0f} | "
                  f"{r['rss_gb']:.2f} / {r['workers_rss_gb']:.2f} GB", flush=True)  # fmt: skip
    print(
        "s/iter and phases: medians over the iterations after the seed; wall includes the seed's evaluation"
    )
    if args.fit and len(off) >= 2:
        xs = [math.log(n) for n, _ in off]
        ys = [math.log(max(s, 1e-6)) for _, s in off]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
        print(f"s/iteration ~ rows^{slope:.2f} with minibatches off ({len(off)} sizes)")


if __name__ == "__main__":
    main()
