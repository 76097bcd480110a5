"""Statements a Snowflake run sends per iteration, counted in Snowpark's local testing mode (issue 27, item 4).

A run of the signals task (80 rows, the offline mutator, seed 1) through a `SnowparkStore` whose session, executor
and writer are counted by `engines.snowflake.counting.StatementCounter` (what each Snowpark call sends to an account;
the module says what is and is not counted). Prints what opening a store costs (once per CALL: the procedures
open one each), what `recover` costs a resume, then per iteration the statements of the store's writes
(`write_iteration`), of the candidate programs (the runtime: staged splits and candidate queries) and of the
other reads, and their medians; and the statements per batch of synthetic runs that write every table
(`tests/named_query_data.py`: AI usage, agent turns, primitives, the AI cache).

    python bench/bench_snowpark_statements.py [--budget 10] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import importlib.util
import json
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "tests")
)  # its helpers import each other by name

import duckdb
from snowflake.snowpark import Session

from coco_sql import api
from coco_sql.engines.snowflake import store as snowpark_store
from coco_sql.engines.snowflake.counting import StatementCounter
from coco_sql.engines.snowflake.local import LocalSql
from tests.test_snowpark import OPTIONS, SIGNALS_SQL

PHASES = ("write", "candidates", "read")


def _tagged(counter: StatementCounter, phase: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> Any:
        with counter.phase(phase):
            return method(*args, **kwargs)

    return run


def counted_store(session: Session) -> tuple[StatementCounter, Any]:
    """A store on `session` whose statements are counted (phase `open` while it opens). Works on the store
    before issue 27 too (no writer, tables created by the store itself), so that both are measured alike."""
    tables = importlib.util.find_spec(
        "coco_sql.engines.snowflake.sql"
    )  # where `create_tables` lives since issue 28
    creates = importlib.import_module("coco_sql.engines.snowflake.sql") if tables else snowpark_store
    if hasattr(creates, "create_tables"):  # deployed once (before issue 27: by every store it opened)
        creates.create_tables(session)
    counter = StatementCounter(session)
    sql = counter.executor(LocalSql(session))
    kwargs: dict[str, Any] = {"sql": sql}
    if hasattr(snowpark_store, "default_writer"):
        kwargs["writes"] = counter.writer(snowpark_store.default_writer(session, sql))
    with counter.phase("open"):
        return counter, snowpark_store.SnowparkStore(session, **kwargs)


def measure(budget: int) -> dict[str, Any]:
    session = Session.builder.config("local_testing", True).create()
    frame = duckdb.sql(SIGNALS_SQL).df()
    frame.columns = [c.upper() for c in frame.columns]
    session.create_dataframe(frame).write.save_as_table("signals")
    counter, store = counted_store(session)
    opening = counter.total("open")
    for name in ("write_iteration", "recover", "create_run"):
        setattr(store, name, _tagged(counter, "write", getattr(store, name)))
    engine = store.candidate_engine

    def candidates() -> Any:
        made = engine()
        for name in ("stage_rows", "query", "run_python", "drop_staged"):
            setattr(made, name, _tagged(counter, "candidates", getattr(made, name)))
        return made

    store.candidate_engine = candidates  # type: ignore[method-assign]
    with counter.phase("task"):
        api.register_task("signals", "signals", OPTIONS, db=store)
    per_iteration: list[Counter[str]] = []
    seen: Counter[tuple[str, str]] = Counter()

    def progress(_: Any) -> None:
        now = Counter(counter.counts)
        step = Counter({p: sum(n for (q, _), n in (now - seen).items() if q == p) for p in PHASES})
        per_iteration.append(step)
        seen.clear()
        seen.update(now)

    with counter.phase("read"):
        api.evolve("signals", db=store, budget=budget, options={"seed": 1}, progress=progress)
    before = counter.total("write")
    store.recover(1)  # what a resume of the (clean) run costs before it starts
    recover = counter.total("write") - before
    counter.close()
    session.close()
    steady = per_iteration[1:]  # iteration 0 scores the seed on every split
    return {
        "open_store": opening,
        "recover": recover,
        "every_table": every_table(),
        "per_iteration": [dict(step) for step in per_iteration],
        "median": {p: statistics.median(s[p] for s in steady) for p in PHASES},
        "median_total": statistics.median(sum(s.values()) for s in steady),
        "max_write": max(s["write"] for s in per_iteration),
        "kinds": {f"{p}/{k}": n for (p, k), n in sorted(counter.counts.items())},
    }


def every_table() -> dict[str, Any]:
    """Statements per batch when every table gets rows: the synthetic runs of the named-query tests (programs,
    evaluations, scores, archive, ledger, events, AI usage and calls, agent turns, primitives, AI cache)."""
    from tests.named_query_data import all_batches

    session = Session.builder.config("local_testing", True).create()
    counter, store = counted_store(session)
    counts = []
    for batch in all_batches():
        before = counter.total()
        store.write_iteration(batch)
        counts.append(counter.total() - before)
    counter.close()
    session.close()
    return {"batches": len(counts), "median": statistics.median(counts), "max": max(counts)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with contextlib.redirect_stderr(sys.stdout):
        result = measure(args.budget)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"opening a store (every CALL): {result['open_store']} statements")
    print(f"recover (every resume) on a clean run: {result['recover']} statements")
    table = result["every_table"]
    print(
        f"a batch that writes every table ({table['batches']} synthetic batches): median {table['median']}, "
        f"max {table['max']} statements"
    )
    print("iteration  write  candidates  read")
    for k, step in enumerate(result["per_iteration"]):
        print(f"{k:9d}  {step['write']:5d}  {step['candidates']:10d}  {step['read']:4d}")
    median = result["median"]
    print(f"median per iteration after the seed: write {median['write']}, candidates {median['candidates']}, "
          f"read {median['read']}; total {result['median_total']}; most writes in one iteration: "
          f"{result['max_write']}")  # fmt: skip
    print("by kind:", result["kinds"])


if __name__ == "__main__":
    main()
