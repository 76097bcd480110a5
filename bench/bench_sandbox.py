"""What the sandbox's process isolation costs per evaluation: the same program in-process vs in the sandbox.

SQL tasks: the evaluator's query (the seed program wrapped as `SELECT id, output FROM (...)`) runs on the
validation rows, alternately in a `LockedDuckDB` inside this process (no kernel limits, no hard deadline: what
coco-sql did before the worker) and in a `Sandbox` (worker process with RLIMIT_DATA, hard kill at the deadline;
its result crosses the pipe as checked JSON). goemotions runs AI_CLASSIFY on the embedded model with a warm
cache, so each chunk of AI calls crosses the pipe to this process and back.

Python tasks (tsp_construct): the seed program over the validation instances, alternately run by the pack's
harness in this process (no limits, no isolation) and by the language's runner (`PythonLanguage.runner`: the
Python sandbox, which forks a fresh process per program from its zygote, plus the harness's `measure` here when
the pack has one). Also reported: the worker's start-up (paid once per split, and again after a kill), and the
CPU time per evaluation, of this process alone in-process and of this process, the worker and the worker's
reaped children (the Python sandbox's per-program processes) sandboxed: on a shared machine, where wall times
swing with the load of others, CPU time shows what the isolation itself costs.

Usage: python bench/bench_sandbox.py [--runs 200] [--tasks lockpicking6,goemotions,tsp_construct]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from coco_sql.evaluate import Evaluator
from coco_sql.languages import Program
from coco_sql.languages.python import PythonLanguage
from coco_sql.languages.python.language import instance_rows
from coco_sql.llm.runtime import AiRuntime
from coco_sql.plugin_loader import local_ai, local_functions
from coco_sql.sandbox import Sandbox
from coco_sql.sandbox.lockdown import LockedDuckDB
from coco_sql.tasks import TaskPack, load_task


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds used so far by this process and, when given, process `pid` with its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    total = own.ru_utime + own.ru_stime
    if pid is not None:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    return total


def timed(run: Callable[[], object], runs: int) -> list[float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        seconds.append((time.perf_counter() - started) * 1000.0)
    return seconds


def bench_task(name: str, runs: int) -> None:
    task = load_task(name)
    if task.language == "python":
        bench_python_task(task, runs)
        return
    runtime = AiRuntime() if task.uses_ai else None
    functions = local_functions(runtime) if runtime is not None else None
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
        rows,
        register_udfs=(
            lambda con: local_ai().register(con, lambda udf, columns: functions.table[udf](*columns))
        )
        if functions
        else None,
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
        timings = interleaved(in_process, isolated, runs, lambda: sandbox.worker_pid)
    finally:
        sandbox.close()
        local.close()
        evaluator.close()
        if runtime is not None:
            runtime.close()
    report(name, len(rows), timings, startup_ms)


def bench_python_task(task: TaskPack, runs: int) -> None:
    """The seed over the validation instances: the harness in this process vs the language's runner."""
    split = task.split("val")
    instances = instance_rows(split.inputs, list(task.input_columns))
    harness: dict[str, object] = {"__name__": "harness"}
    exec(compile(task.harness or "", "harness.py", "exec"), harness)
    module: dict[str, object] = {"__name__": "candidate"}
    exec(compile(task.seed_program, "seed.py", "exec"), module)
    entry, run, measure = module[task.entry or ""], harness["run"], harness.get("measure")

    def in_process() -> list[tuple[str, object]]:
        answers = [(i, run(entry, instance)) for i, instance in instances]  # type: ignore[operator]
        if measure is None:
            return answers
        by_id = dict(instances)
        return [(i, measure(answer, by_id[i])) for i, answer in answers]  # type: ignore[operator]

    program = Program("python", task.seed_program, task.seed_program, None)
    started = time.perf_counter()
    runner = PythonLanguage(task).runner(split, None)
    first = runner.run(program, 60.0)
    startup_ms = (time.perf_counter() - started) * 1000.0 - first.elapsed_ms

    def isolated() -> list[tuple[object, object]]:
        return runner.run(program, 60.0).outputs

    try:
        assert sorted(in_process()) == sorted(isolated())  # the same tour lengths
        timings = interleaved(in_process, isolated, runs, lambda: runner.sandbox.worker_pid)
    finally:
        runner.close()
    report(task.name, len(instances), timings, startup_ms)


Timings = tuple[list[float], list[float], list[float], list[float]]


def interleaved(
    in_process: Callable[[], object],
    isolated: Callable[[], object],
    runs: int,
    worker_pid: Callable[[], int | None],
) -> Timings:
    """Both modes, `runs` times each, in interleaved blocks, so that machine load hits both alike: wall ms per
    run of each, and CPU ms per run of each block (the clock ticks in 10 ms: a block is measured as a whole)."""
    local_ms: list[float] = []
    worker_ms: list[float] = []
    local_cpu: list[float] = []
    worker_cpu: list[float] = []
    block = min(10, runs)
    for _ in range(max(1, runs // block)):
        before = cpu_seconds(None)
        local_ms += timed(in_process, block)
        local_cpu.append((cpu_seconds(None) - before) * 1000.0 / block)
        pid = worker_pid()
        before = cpu_seconds(pid)
        worker_ms += timed(isolated, block)
        worker_cpu.append((cpu_seconds(pid) - before) * 1000.0 / block)
    return local_ms, worker_ms, local_cpu, worker_cpu


def report(name: str, rows: int, timings: Timings, startup_ms: float) -> None:
    local_ms, worker_ms, local_cpu, worker_cpu = timings
    extra = [w - m for w, m in zip(worker_ms, local_ms, strict=True)]
    print(
        f"| {name} | {rows:,} | {statistics.median(local_ms):.2f} / {percentile(local_ms, 0.95):.2f} "
        f"| {statistics.median(worker_ms):.2f} / {percentile(worker_ms, 0.95):.2f} "
        f"| {statistics.median(worker_ms) - statistics.median(local_ms):+.2f} / "
        f"{percentile(worker_ms, 0.95) - percentile(local_ms, 0.95):+.2f} "
        f"| {statistics.median(extra):+.2f} "
        f"| {statistics.median(local_cpu):.1f} / {statistics.median(worker_cpu):.1f} | {startup_ms:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--tasks", default="lockpicking6,goemotions,tsp_construct")
    args = parser.parse_args()
    print(f"seed program on the validation rows, {args.runs} runs per mode (ms)\n", flush=True)
    print(
        "| task | rows | in-process median / p95 | worker median / p95 | isolation cost median / p95 "
        "| paired median | CPU in-process / sandboxed | worker start-up |\n|---|---|---|---|---|---|---|---|"
    )
    for name in args.tasks.split(","):
        bench_task(name, args.runs)


if __name__ == "__main__":
    main()
