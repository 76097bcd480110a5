"""The primitive library's tables (`primitives`, `primitive_trials`) in both stores: written with their
iteration, read back for resume, and cleaned with the other per-iteration tables after an interrupted write."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.primitives import PrimitiveLibrary, posteriors
from coco_sql.store import IterationBatch, ProgramRecord, RunRecord, program_id_for
from coco_sql.store.records import Primitive, PrimitiveTrial
from coco_sql.store.rows import WRITE_ORDER, iteration_rows

LOCK = Primitive("p_lock", "sql", "CREATE MACRO p_lock(p1) AS p1 = 4;", "p_lock(p1)", "1-0", 0, "extracted")
NEAR = Primitive(
    "p_near", "sql", "CREATE MACRO p_near(a, b) AS ABS(a - b) < 2;", "p_near(a, b)", None, 1, "generated"
)
TRIALS = (
    PrimitiveTrial(1, "1-1", "P1", "p_lock", 0.25, 0.5, True, True),
    PrimitiveTrial(2, "1-2", "P2", "p_near", 0.5, None, False, True),
    PrimitiveTrial(2, "1-2", "P3", None, 0.5, 0.75, True, False, "P3: child adds p_near"),
)


def program(iteration: int) -> ProgramRecord:
    return ProgramRecord(program_id_for(1, iteration), 1, iteration, None, None, "SELECT 1", "sql", "duckdb", 0,
                         "1:0", None, "hillclimb", True, None)  # fmt: skip


def batches() -> list[IterationBatch]:
    return [
        IterationBatch(1, 0, programs=(program(0),), primitives=(LOCK,)),
        IterationBatch(1, 1, programs=(program(1),), primitives=(NEAR,), primitive_trials=TRIALS[:1]),
        IterationBatch(1, 2, programs=(program(2),), primitive_trials=TRIALS[1:]),
    ]


def run_record() -> RunRecord:
    return RunRecord(1, "lockpicking6", "sha256:abc", seed=7, budget=3, config={})


def test_primitive_rows_come_before_the_program_row_that_vouches_for_them() -> None:
    assert WRITE_ORDER.index("primitives") < WRITE_ORDER.index("programs")
    assert WRITE_ORDER.index("primitive_trials") < WRITE_ORDER.index("programs")
    rows = iteration_rows(batches()[1], datetime(2026, 1, 1))
    assert rows["primitives"] == [
        (1, *(getattr(NEAR, f) for f in NEAR.__dataclass_fields__), datetime(2026, 1, 1))
    ]
    assert rows["primitive_trials"][0][:10] == (1, 1, "1-1", "P1", "p_lock", 0.25, 0.5, True, True, None)


@pytest.fixture
def store(store_path: Path) -> Iterator[DuckDBStore]:
    with DuckDBStore(store_path) as opened:
        opened.create_run(run_record())
        yield opened


def test_duckdb_round_trip(store: DuckDBStore, store_path: Path) -> None:
    for batch in batches():
        store.write_iteration(batch)
    store.close()
    with DuckDBStore(store_path, read_only=True) as reopened:
        assert reopened.primitives(1) == [LOCK, NEAR]
        assert reopened.primitive_trials(1) == list(TRIALS)
        assert reopened.primitives(2) == [] and reopened.primitive_trials(2) == []
        library = PrimitiveLibrary.from_rows(reopened.primitives(1))
        means = {n: p.mean for n, p in posteriors(library, reopened.primitive_trials(1)).items()}
        assert means == {"p_lock": pytest.approx(2 / 3), "p_near": pytest.approx(1 / 3)}


def test_a_failed_duckdb_batch_leaves_no_primitive_rows(store: DuckDBStore) -> None:
    store.write_iteration(batches()[0])
    duplicate = IterationBatch(
        1, 1, programs=(program(1), program(1)), primitives=(NEAR,), primitive_trials=TRIALS[:1]
    )
    with pytest.raises(duckdb.ConstraintException):
        store.write_iteration(duplicate)
    assert store.primitives(1) == [LOCK] and store.primitive_trials(1) == []


snowpark = pytest.importorskip(
    "snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')"
)


@pytest.fixture
def snowpark_store() -> Iterator[Any]:
    from snowflake.snowpark import Session

    from coco_sql.engines.snowflake.sql import create_tables
    from coco_sql.engines.snowflake.store import SnowparkStore

    session = Session.builder.config("local_testing", True).create()
    try:
        create_tables(session)
        opened = SnowparkStore(session)
        opened.create_run(run_record())
        yield opened
    finally:
        session.close()


def test_snowpark_round_trip_and_recovery(snowpark_store: Any) -> None:
    for batch in batches()[:2]:
        snowpark_store.write_iteration(batch)
    # iteration 2 died after its primitive rows, before its program row
    late = Primitive("p_late", "sql", "CREATE MACRO p_late(x) AS x > 9;", "p_late(x)", "1-2", 2, "extracted")
    interrupted = IterationBatch(
        1, 2, programs=(program(2),), primitives=(late,), primitive_trials=TRIALS[1:]
    )
    for table, rows in iteration_rows(interrupted, datetime(2026, 1, 1)).items():
        if table == "programs":
            break
        snowpark_store._append(table, rows)
    assert [p.name for p in snowpark_store.primitives(1)] == ["p_lock", "p_near", "p_late"]
    snowpark_store.recover(1)
    assert snowpark_store.primitives(1) == [LOCK, NEAR]
    assert snowpark_store.primitive_trials(1) == list(TRIALS[:1])
    snowpark_store.write_iteration(batches()[2])
    assert snowpark_store.primitive_trials(1) == list(TRIALS)
