"""What the dbt sandbox costs: jaffle_shop evaluated by a warm `DbtSession` in this process vs in a `DbtSandbox`.

In-process (the first measurement, kept as the baseline): dbt imported here, no kernel layer, no deadline
that can stop a Jinja loop. Sandboxed: the worker process with every kernel layer (jail, Landlock, seccomp,
limits), validation (the Jinja render) in the worker, the targets' rows back as checked JSON and turned into
DataFrames here. Both alternate the seed and the solution project, so every run sees a changed project (dbt's
partial parse re-reads the changed files), with and without the data tests; "unchanged" runs one project twice.

Reported: the cold start (in-process: importing dbt and the first run; sandboxed: starting the worker, which
imports dbt and does one warm-up run, then the first run), and the median wall seconds of the warm runs. On a
shared machine wall times swing with the load of others: the load average is printed with the table.

Usage: python bench/bench_dbt_sandbox.py [--runs 5]   (in an environment with `coco-sql[dbt]`)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.validate import DbtSpec, ValidatedProject, validate_project

JAFFLE = Path(__file__).resolve().parents[1] / "tasks" / "jaffle_shop"
TARGETS = ["customers", "orders"]


def sources() -> dict[str, pd.DataFrame]:
    names = ("raw_customers", "raw_orders", "raw_payments")
    return {f"jaffle_shop.{name}": pd.read_csv(JAFFLE / "data" / f"{name}.csv") for name in names}


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    rows = sources()
    projects = {folder: DbtProject.from_dir(JAFFLE / folder) for folder in ("seed", "solution")}
    validated: dict[str, ValidatedProject] = {name: validate_project(p) for name, p in projects.items()}
    times: dict[str, list[float]] = {}

    def record(key: str, seconds: float) -> None:
        times.setdefault(key, []).append(seconds)

    # in-process: import dbt, then the first run
    start = time.perf_counter()
    from coco_sql.languages.dbt.runner import DbtSession

    session = DbtSession()
    session.run(validated["solution"], rows, TARGETS)
    record("in-process cold (import dbt + first run)", time.perf_counter() - start)

    from coco_sql.languages.dbt.sandbox import DbtSandbox

    sandbox = DbtSandbox(rows)
    record("sandbox cold: worker start (imports, layers, warm-up run)", timed(sandbox._supervisor.ensure))
    forms = {}
    for name, project in projects.items():
        record("sandbox: validate in the worker", timed(lambda p=project, n=name: forms.update({n: sandbox.validate(p, DbtSpec(), 60.0)})))  # fmt: skip
        record("in-process: validate", timed(lambda p=project: validate_project(p)))
    record("sandbox cold: first run", timed(lambda: sandbox.run(forms["solution"], TARGETS, 120.0)))
    try:
        for _ in range(runs):
            for name in ("seed", "solution"):
                for tests in (True, False):
                    label = f"warm {name}, {'with' if tests else 'without'} data tests"
                    record(f"in-process {label}", timed(lambda n=name, t=tests: session.run(validated[n], rows, TARGETS, tests=t)))  # fmt: skip
                    record(f"sandbox {label}", timed(lambda n=name, t=tests: sandbox.run(forms[n], TARGETS, 120.0, tests=t)))  # fmt: skip
            for where, run in (
                ("in-process", lambda: session.run(validated["solution"], rows, TARGETS)),
                ("sandbox", lambda: sandbox.run(forms["solution"], TARGETS, 120.0)),
            ):
                run()
                record(f"{where} warm solution, unchanged, with data tests", timed(run))
        layers = sandbox.layers
        restarts = sandbox.restarts
    finally:
        sandbox.close()
        session.close()
    print(f"load average {os.getloadavg()[0]:.1f}; sandbox layers {layers}; restarts {restarts}")
    print(f"{'what':<66} {'median s':>9} {'n':>3}")
    for key in sorted(times, key=lambda k: (k.split(" ", 1)[1], k)):
        print(f"{key:<66} {statistics.median(times[key]):9.3f} {len(times[key]):3d}")


if __name__ == "__main__":
    main()
