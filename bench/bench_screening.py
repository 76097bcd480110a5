"""Seconds per iteration, by phase, of the offline SQL mutator on lockpicking-style pools of growing size.

Generates a lockpicking6 pack whose pool holds ROWS rows (the generator of `scripts/make_lockpicking6.py`, its rules
and seeds; a 200-row test split) into a temporary directory, evolves it for a few iterations with the offline
mutator and reports the loop's own phase timings (`IterationReport.timings_ms`): parent selection, curation,
mutation (screening and draft tests on the training rows) and evaluation of the child, plus peak RSS.

    python bench/bench_screening.py                       # 5,000 rows, 5 iterations (about half a minute)
    python bench/bench_screening.py --rows 50 5000 50000 --iterations 10 --targeting uniform
    python bench/bench_screening.py --rows 5000 --profile # cProfile of the whole run, top 25 by cumulative time

`--targeting uniform` skips InfoGain targeting (a dense N x N kernel when these numbers were first taken, now a
sparse one); the mutator's work does not depend on how its targets were chosen beyond which guards it screens.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import pstats
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from coco_sql import api
from coco_sql.engine import IterationReport

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("select", "curate", "mutate", "evaluate")


def _generator():  # scripts/ is not a package: load the pack's own generator by path
    spec = importlib.util.spec_from_file_location(
        "make_lockpicking6", ROOT / "scripts" / "make_lockpicking6.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_pack(directory: Path, rows: int, test_rows: int = 200) -> Path:
    """A copy of tasks/lockpicking6 with a `rows`-row pool drawn by the pack's generator."""
    generator = _generator()
    pack = directory / f"lockpicking6_{rows}"
    (pack / "data").mkdir(parents=True)
    shutil.copy(ROOT / "tasks" / "lockpicking6" / "seed.sql", pack / "seed.sql")
    toml = (ROOT / "tasks" / "lockpicking6" / "task.toml").read_text(encoding="utf-8")
    (pack / "task.toml").write_text(
        toml.replace('name = "lockpicking6"', f'name = "{pack.name}"', 1), "utf-8"
    )
    width = max(3, len(str(rows)))  # 50 rows: the committed pool, byte for byte
    generator.write(pack / "data" / "pool.csv", "lp", width, rows, generator.POOL_SEED)
    generator.write(pack / "data" / "test.csv", "lt", 4, test_rows, generator.TEST_SEED)
    return pack


def run(rows: int, iterations: int, seed: int, targeting: str, profile: bool) -> dict[str, float]:
    reports: list[IterationReport] = []
    with tempfile.TemporaryDirectory() as tmp:
        pack = make_pack(Path(tmp), rows)
        profiler = cProfile.Profile() if profile else None
        started = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        summary = api.evolve(
            str(pack),
            db=str(Path(tmp) / "bench.duckdb"),
            budget=iterations,
            options={"seed": seed, "targeting": targeting},
            progress=reports.append,
        )
        if profiler is not None:
            profiler.disable()
        wall = time.perf_counter() - started
    if profiler is not None:
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
    timed = [r for r in reports if r.timings_ms and r.iteration > 0]
    result = {
        phase: statistics.median(r.timings_ms.get(phase, 0.0) for r in timed) / 1000 if timed else 0.0
        for phase in PHASES
    }
    result["iteration"] = (
        statistics.median(sum(r.timings_ms.get(p, 0.0) for p in PHASES) for r in timed) / 1000
        if timed
        else 0.0
    )
    result["wall"] = wall
    result["champion_val"] = summary.champion_val_score
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[5000], help="pool sizes (default 5000)")
    parser.add_argument("--iterations", type=int, default=5, help="iterations per run (default 5)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--targeting", choices=("infogain", "uniform"), default="infogain")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each run")
    args = parser.parse_args()
    print(
        f"{'rows':>8} | {'s/iter':>7} | {'select':>7} | {'curate':>7} | {'mutate':>7} | {'evaluate':>8} | "
        f"{'wall s':>7} | {'val':>5} | peak RSS"
    )
    for rows in args.rows:
        r = run(rows, args.iterations, args.seed, args.targeting, args.profile)
        rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(
            f"{rows:>8,} | {r['iteration']:>7.3f} | {r['select']:>7.3f} | {r['curate']:>7.3f} | "
            f"{r['mutate']:>7.3f} | {r['evaluate']:>8.3f} | {r['wall']:>7.1f} | {r['champion_val']:>5.3f} | "
            f"{rss_gb:.2f} GB (this process, so far)",
            flush=True,
        )
    print("phases are medians over the iterations after the seed; s/iter is their sum")


if __name__ == "__main__":
    main()
