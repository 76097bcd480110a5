"""What one dbt evaluation costs on each path, and whether both paths score a project the same.

- dbt: the dbt sandbox (`languages.dbt.language.DbtLanguage`): a warm worker with every kernel layer, dbt's
  parse, run and test, the targets' rows back as JSON;
- warehouse: `languages.dbt.warehouse.DbtWarehouseLanguage` over Snowpark's local-testing session
  (`WarehouseCandidates`): each model rendered by our Jinja, run as a query and saved as a temporary table of
  the session, the data tests as one query, the targets read back. On an account each of those is a warehouse
  statement; here local testing's stand-in runs them in DuckDB in this process.

Each path evaluates each project `--runs` times on the train split (validation included; the first dbt run is
after the worker's start, which is reported apart); the median wall seconds are printed with the score, and the
load average (the machine is shared: wall times swing with the load of others). Tasks: the jaffle_shop pack
(seed and the reference solution) and the shop task of tests/dbt_cases.py, registered from plain SQL tables
(seed and the repaired project).

Usage: python bench/bench_dbt_warehouse.py [--runs 3] [--task jaffle_shop|shop]   (needs coco-sql[dbt,snowflake])
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def tasks(which: str) -> dict[str, tuple[Any, dict[str, str]]]:
    from coco_sql.languages.dbt.project import DbtProject
    from coco_sql.tasks import load_task

    found = {}
    if which in ("jaffle_shop", "all"):
        pack = load_task("jaffle_shop")
        solution = DbtProject.from_dir(REPO / "tasks" / "jaffle_shop" / "solution").to_text()
        found["jaffle_shop"] = (pack, {"seed": pack.seed_program, "solution": solution})
    if which in ("shop", "all"):
        sys.path.insert(0, str(REPO / "tests"))
        from dbt_cases import SHOP_FIXED, SHOP_OPTIONS, SHOP_SEED, SHOP_SETUP  # type: ignore[import-not-found]

        import coco_sql
        from coco_sql import api
        from coco_sql.engines.duckdb.store import DuckDBStore

        con = coco_sql.connect(":memory:")
        con.execute(SHOP_SETUP)
        con.execute("CALL coco_task('shop', NULL, ?::JSON)", [json.dumps(SHOP_OPTIONS)]).fetchall()
        found["shop"] = (
            api._task("shop", DuckDBStore.over(con)),
            {"seed": SHOP_SEED, "repaired": SHOP_FIXED},
        )
    return found


def evaluate(runner: Any, language: Any, task: Any, code: str) -> tuple[float, float]:
    """(wall seconds, mean score on the train split) of one evaluation, validation included."""
    start = time.perf_counter()
    result = runner.run(language.validate(code), 600.0)
    seconds = time.perf_counter() - start
    expected = task.split("train").expected
    got = dict(result.outputs)
    ids = sorted(expected)
    scores = task.scorer.score([got.get(i) for i in ids], [expected[i] for i in ids])
    return seconds, sum(scores) / len(scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--task", choices=("jaffle_shop", "shop", "all"), default="all")
    arguments = parser.parse_args()
    from snowflake.snowpark import Session

    from coco_sql.engines.snowflake.candidates import WarehouseCandidates
    from coco_sql.languages.dbt.language import DbtLanguage
    from coco_sql.languages.dbt.warehouse import DbtWarehouseLanguage

    session = Session.builder.config("local_testing", True).create()
    print(f"load average {os.getloadavg()[0]:.1f} at the start")
    print("| task | project | path | s per evaluation (median) | train score |")
    print("|---|---|---|---|---|")
    for name, (task, projects) in tasks(arguments.task).items():
        paths = {
            "dbt sandbox": DbtLanguage(task),
            "warehouse": DbtWarehouseLanguage(task, WarehouseCandidates(session)),
        }
        for path, language in paths.items():
            clock = time.perf_counter()
            runner = language.runner(task.split("train"), None)
            first = next(iter(projects.values()))
            language.validate(first)  # the dbt worker starts here
            start = time.perf_counter() - clock
            if path == "dbt sandbox":
                print(f"| {name} | (worker start) | {path} | {start:.1f} | |")
            try:
                for project, code in projects.items():
                    found = [evaluate(runner, language, task, code) for _ in range(arguments.runs)]
                    median = statistics.median(s for s, _ in found)
                    print(f"| {name} | {project} | {path} | {median:.2f} | {found[0][1]:.3f} |")
            finally:
                runner.close()
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    session.close()


if __name__ == "__main__":
    main()
