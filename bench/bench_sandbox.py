"""What the sandbox's process isolation costs per evaluation: the same query in-process vs in the worker process.

For each task, the evaluator's query (the seed program wrapped as `SELECT id, output FROM (...)`) runs on the
validation rows, alternately in a `LockedDuckDB` inside this process (no kernel limits, no hard deadline: what
coco-sql did before the worker) and in a `Sandbox` (worker process with RLIMIT_DATA, hard kill at the deadline).
goemotions runs AI_CLASSIFY on the embedded model with a warm cache, so each chunk of AI calls crosses the pipe
to this process and back. Also reported: the worker's start-up (paid once per split, and again after a kill).

Usage: python bench/bench_sandbox.py [--runs 200] [--tasks lockpicking6,goemotions]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import pandas as pd

from coco_sql.aifuncs.duckdb_udfs import register_ai_functions
from coco_sql.aifuncs.functions import AiFunctions
from coco_sql.evaluate import Evaluator
from coco_sql.llm.runtime import AiRuntime
from coco_sql.sandbox import Sandbox
from coco_sql.sandbox.lockdown import LockedDuckDB
from coco_sql.tasks import load_task


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(run: Callable[[], object], runs: int) -> list[float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        seconds.append((time.perf_counter() - started) * 1000.0)
    return seconds


def bench_task(name: str, runs: int) -> None:
    task = load_task(name)
    runtime = AiRuntime() if task.uses_ai else None
    functions = AiFunctions(runtime) if runtime is not None else None
    evaluator = Evaluator(task, ("val",), ai=runtime)
    program = evaluator.check(task.seed_program)
    output = task.contract.output.replace('"', '""')
    sql = f'SELECT CAST(id AS VARCHAR) AS id, "{output}" AS output FROM ({program.runnable}) AS candidate'
    rows: pd.DataFrame = task.split("val").inputs

    started = time.perf_counter()
    sandbox = Sandbox(rows, ai=functions)
    sandbox.statement_types("SELECT 1")
    startup_ms = (time.perf_counter() - started) * 1000.0
    local = LockedDuckDB(
        rows, register_udfs=(lambda con: register_ai_functions(con, functions)) if functions else None
    )

    def in_process() -> object:
        if runtime is None:
            return local.run(sql, 60.0)
        with runtime.evaluation():
            return local.run(sql, 60.0)

    def isolated() -> object:
        if runtime is None:
            return sandbox.run(sql, 60.0)
        with runtime.evaluation():
            return sandbox.run(sql, 60.0)

    try:
        assert sorted(in_process().rows) == sorted(
            isolated().rows
        )  # warm-up (embeds the texts once), same answer
        local_ms: list[float] = []
        worker_ms: list[float] = []
        block = min(10, runs)
        for _ in range(max(1, runs // block)):  # interleaved blocks, so that machine load hits both alike
            local_ms += timed(in_process, block)
            worker_ms += timed(isolated, block)
    finally:
        sandbox.close()
        local.close()
        evaluator.close()
        if runtime is not None:
            runtime.close()
    extra = [w - m for w, m in zip(worker_ms, local_ms, strict=True)]
    print(
        f"| {name} | {len(rows):,} | {statistics.median(local_ms):.2f} / {percentile(local_ms, 0.95):.2f} "
        f"| {statistics.median(worker_ms):.2f} / {percentile(worker_ms, 0.95):.2f} "
        f"| {statistics.median(worker_ms) - statistics.median(local_ms):+.2f} / "
        f"{percentile(worker_ms, 0.95) - percentile(local_ms, 0.95):+.2f} "
        f"| {statistics.median(extra):+.2f} | {startup_ms:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--tasks", default="lockpicking6,goemotions")
    args = parser.parse_args()
    print(f"seed program on the validation rows, {args.runs} runs per mode (ms)\n")
    print(
        "| task | rows | in-process median / p95 | worker median / p95 | isolation cost median / p95 "
        "| paired median | worker start-up |\n|---|---|---|---|---|---|---|"
    )
    for name in args.tasks.split(","):
        bench_task(name, args.runs)


if __name__ == "__main__":
    main()
