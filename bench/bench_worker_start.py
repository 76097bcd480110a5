"""What a sandbox worker's start costs, forked from its template (`sandbox.fork_server`) or started from scratch.

One start: a sandbox over lockpicking6's training rows (or jaffle_shop's sources for dbt) starts its worker,
which answers one query (dbt: one validation), and closes. Reported per way: the median wall milliseconds of the
start and first answer, and the worker's own CPU milliseconds (user + system, read from /proc just before it is
closed). The template's own start is paid once per process and is reported apart. The two ways alternate, so a
change in the machine's load falls on both.

Usage: python bench/bench_worker_start.py [--runs 10] [--dbt-runs 3]   (--dbt-runs 0 skips dbt)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from coco_sql.languages.dbt.sandbox import WORKER_ENV, DbtSandbox
from coco_sql.sandbox.database import WORKER_SETTINGS, Sandbox
from coco_sql.sandbox.fork_server import template
from coco_sql.tasks import load_task

TASKS = Path(__file__).resolve().parents[1] / "tasks"


def worker_cpu_ms(pid: int | None) -> float:
    assert pid is not None
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:13]) / os.sysconf("SC_CLK_TCK") * 1000.0  # utime + stime


def one_sql_start(rows: pd.DataFrame) -> tuple[float, float]:
    start = time.perf_counter()
    with Sandbox(rows) as box:
        box.run("SELECT count(*) FROM input", 30.0)
        wall = (time.perf_counter() - start) * 1000.0
        return wall, worker_cpu_ms(box.worker_pid)


def one_dbt_start(sources: dict[str, pd.DataFrame]) -> tuple[float, float]:
    from coco_sql.languages.dbt.project import DbtProject
    from coco_sql.languages.dbt.validate import DbtSpec

    project = DbtProject.from_dir(TASKS / "jaffle_shop" / "seed")
    start = time.perf_counter()
    with DbtSandbox(sources) as box:
        box.validate(project, DbtSpec(), 60.0)
        wall = (time.perf_counter() - start) * 1000.0
        return wall, worker_cpu_ms(box.worker_pid)


def compare(
    name: str, start_one: Callable[[], tuple[float, float]], module: str, settings: dict, runs: int
) -> None:
    tpl = template(module, (), settings)
    clock = time.perf_counter()
    start_one()  # the template's start and its first fork
    template_ms = (time.perf_counter() - clock) * 1000.0
    results: dict[str, list[tuple[float, float]]] = {"forked": [], "from scratch": []}
    for _ in range(runs):
        for way in results:
            tpl.unavailable = None if way == "forked" else "off for the benchmark"
            results[way].append(start_one())
    tpl.unavailable = None
    for way, measured in results.items():
        wall = statistics.median(m[0] for m in measured)
        cpu = statistics.median(m[1] for m in measured)
        print(f"| {name} | {way} | {wall:,.0f} | {cpu:,.0f} | {runs} |")
    print(f"| {name} | the template's start and first fork | {template_ms:,.0f} | | 1 |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--dbt-runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| worker | started | wall ms (median) | worker CPU ms (median) | n |\n|---|---|---|---|---|")
    rows = load_task("lockpicking6").split("train").inputs
    compare("SQL", lambda: one_sql_start(rows), "coco_sql.sandbox.worker", WORKER_SETTINGS, args.runs)
    if args.dbt_runs:
        names = ("raw_customers", "raw_orders", "raw_payments")
        data = TASKS / "jaffle_shop" / "data"
        sources = {f"jaffle_shop.{n}": pd.read_csv(data / f"{n}.csv") for n in names}
        compare(
            "dbt", lambda: one_dbt_start(sources), "coco_sql.languages.dbt.worker", WORKER_ENV, args.dbt_runs
        )


if __name__ == "__main__":
    main()
