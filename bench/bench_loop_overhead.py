"""Loop overhead per iteration with a large store: everything but evaluation and mutation.

Builds a DuckDB store holding one lockpicking6 run with 10,000 programs and 1,000,000 evaluation rows
(10,000 programs x 2 splits x 50 rows), then resumes it for N more iterations with the real offline mutator
and reports the loop's own time per iteration: parent selection, archive admission and migration, state
upkeep and the one-transaction store write. Also reports the one-off cost of loading the run on resume.

    python bench/bench_loop_overhead.py [--iterations 30] [--programs 10000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

from coco_sql.engine import EvolutionLoop, IterationReport, RunConfig
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.store import RunRecord
from coco_sql.tasks import load_task


def populate(db: Path, programs: int) -> RunConfig:
    task = load_task("lockpicking6")
    config = RunConfig(seed=0, budget=programs - 1, mutator_settings={"max_drafts": 8})
    with DuckDBStore(db) as store:
        store.create_run(RunRecord(1, task.name, task.fingerprint(), 0, programs - 1, config.to_stored()))
    ids = sorted(task.split("train").expected)
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TEMP TABLE ids AS SELECT unnest(?::VARCHAR[]) AS id", [ids])
        con.execute(
            "INSERT INTO programs SELECT '1-' || i, 1, i, CASE WHEN i > 0 THEN '1-' || (i - 1) END, NULL, ?, "
            "'sql', 'duckdb', i % 2, (i % 10) || ':' || (i // 10 % 10), 'synthetic', 'hillclimb', true, NULL, "
            "now() FROM range(?) t(i)",
            [task.seed_program, programs],
        )
        con.execute(
            "INSERT INTO program_scores SELECT 1, '1-' || i, s, (i % 50) / 100.0, 50, 0, 0, 0, 0, 1.0, now(), 0 "
            "FROM range(?) t(i), (VALUES ('train'), ('val')) v(s)",
            [programs],
        )
        con.execute(
            "INSERT INTO evaluations SELECT 1, '1-' || i, s, id, (hash(i, id) % 2)::DOUBLE, '1', '1', NULL, "
            "'{\"status\": \"ok\"}'::JSON, 0, 0, 0, 0.1 FROM range(?) t(i), (VALUES ('train'), ('val')) v(s), ids",
            [programs],
        )
        con.execute(
            "INSERT INTO archive_entries SELECT 1, i, 0, i % 2, (i % 10) || ':' || (i // 10 % 10), '1-' || i, "
            "'admitted' FROM range(?) t(i) WHERE i % 7 = 0",
            [programs],
        )
        counts = {
            t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("programs", "evaluations")
        }
    print(f"store: {counts['programs']:,} programs, {counts['evaluations']:,} evaluation rows")
    return config


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--programs", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        started = time.perf_counter()
        config = populate(db, args.programs)
        print(f"populate: {time.perf_counter() - started:.1f} s")
        reports: list[IterationReport] = []
        commits: list[float] = []
        with DuckDBStore(db) as store:
            write = store.write_iteration

            def timed_write(batch):  # the commit itself runs behind the next iteration's mutation
                started = time.perf_counter()
                write(batch)
                commits.append((time.perf_counter() - started) * 1000)

            store.write_iteration = timed_write  # type: ignore[method-assign]
            loop = EvolutionLoop(store, load_task("lockpicking6"), progress=reports.append)
            started = time.perf_counter()
            loop.resume(1, budget=config.budget + args.iterations)
            total = time.perf_counter() - started
    overhead = sorted(r.timings_ms["overhead"] for r in reports if r.timings_ms)
    mutate = [r.timings_ms["mutate"] for r in reports if r.timings_ms]
    evaluate = [r.timings_ms["evaluate"] for r in reports if r.timings_ms]
    p95 = overhead[max(0, round(0.95 * len(overhead)) - 1)]
    select = [r.timings_ms["select"] for r in reports if r.timings_ms]
    curate = [r.timings_ms["curate"] for r in reports if r.timings_ms]
    print(
        f"{len(overhead)} iterations resumed in {total:.1f} s (incl. loading the run and the final test report)"
    )
    print(
        f"loop overhead per iteration: median {statistics.median(overhead):.2f} ms, p95 {p95:.2f} ms, "
        f"max {overhead[-1]:.2f} ms  (target <= 20 ms); parent selection alone median {statistics.median(select):.2f} ms"
    )
    print(
        f"curation of the context bundle (InfoGain targets, donors, ledger; counted with mutation): "
        f"median {statistics.median(curate):.2f} ms"
    )
    print(
        f"one-transaction commit of an iteration (off the critical path): median {statistics.median(commits):.1f} ms"
    )
    print(
        f"for scale: mutation median {statistics.median(mutate):.0f} ms, "
        f"evaluation median {statistics.median(evaluate):.1f} ms"
    )


if __name__ == "__main__":
    main()
