"""The Snowpark store's writes in a bounded number of statements (issue 27, item 4), in Snowpark's local testing.

Statements are counted by `engines.snowflake.counting.StatementCounter`, which follows what each Snowpark call sends
to an account (its own checks below pin that model on plain Snowpark calls). The values of a batch must come
back exactly as DuckDB stores them, through the JSON text of the staging table and the INSERT ALL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

snowpark = pytest.importorskip(
    "snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')"
)
import numpy as np  # noqa: E402
from snowflake.snowpark import Session  # noqa: E402

from coco_sql.engines.duckdb import PLUGIN as DUCKDB  # noqa: E402
from coco_sql.engines.duckdb.store import DuckDBStore  # noqa: E402
from coco_sql.engines.snowflake import PLUGIN as SNOWFLAKE  # noqa: E402
from coco_sql.engines.snowflake.batch import (  # noqa: E402
    LITERAL_BYTES,
    RECOVER_SQL,
    chunks,
    insert_all,
    staged_rows,
)
from coco_sql.engines.snowflake.counting import StatementCounter  # noqa: E402
from coco_sql.engines.snowflake.local import LocalSql  # noqa: E402
from coco_sql.engines.snowflake.local_writes import LocalWrites  # noqa: E402
from coco_sql.engines.snowflake.sql import create_tables  # noqa: E402
from coco_sql.engines.snowflake.store import SnowparkStore, default_writer  # noqa: E402
from coco_sql.engines.snowflake.translate import snowflake_query  # noqa: E402
from coco_sql.llm.cache import CachedEmbedding, CachedResponse  # noqa: E402
from coco_sql.store import Event, IterationBatch  # noqa: E402
from coco_sql.store.portable import double_columns, portability_problems  # noqa: E402
from tests.named_query_data import batches  # noqa: E402


@pytest.fixture
def counted() -> Iterator[tuple[SnowparkStore, StatementCounter, Session]]:
    """A store on a deployed local session, every statement it sends counted."""
    session = Session.builder.config("local_testing", True).create()
    create_tables(session)
    counter = StatementCounter(session)
    sql = counter.executor(LocalSql(session))
    store = SnowparkStore(session, sql=sql, writes=counter.writer(default_writer(session, sql)))
    yield store, counter, session
    counter.close()
    session.close()


@pytest.mark.slow
def test_an_iteration_is_written_in_two_statements_and_a_run_end_in_three(counted: Any) -> None:
    store, counter, _ = counted
    assert counter.total() == 0  # opening a store runs nothing: the tables come from the deploy
    run = batches(1, 3, seed=3)
    spent = []
    for batch in run:
        before = counter.total()
        store.write_iteration(batch)
        spent.append(counter.total() - before)
    # the staging table (inlined rows: one CREATE TEMPORARY TABLE AS SELECT) and the INSERT ALL; the finish
    # batch also updates the run's status
    assert spent == [2, 2, 2, 2, 3]
    assert counter.counts[("other", "show_tables")] == 0 and counter.counts[("other", "bind_stage")] == 0
    before = counter.total()
    store.recover(1)  # a clean run: one query finds nothing to repair
    assert counter.total() - before == 1
    assert len(store.table_frame("programs")) == 4 and store.get_run(1).status == "finished"


def test_a_large_batch_is_staged_through_binds_and_still_one_insert(counted: Any) -> None:
    store, counter, _ = counted
    seed = batches(1, 0, seed=3)[0]
    big = replace(seed, events=tuple(Event(0, "note", None, {"k": k}) for k in range(300)))
    store.write_iteration(big)
    # 300 events past Snowpark's bind threshold: a temporary table, a bound insert and a drop around the
    # staging statement, then the INSERT ALL
    assert counter.total() == 1 + 3 + 1 and counter.counts[("other", "sql")] == 1
    assert sorted(store.table_frame("events")["seq"]) == list(range(300))


def test_rows_past_the_literal_guideline_go_in_several_chunks() -> None:
    text = "x" * (LITERAL_BYTES // 3)
    rows = [("events", text)] * 7  # few rows (inlined by Snowpark), each a third of the guideline
    parts = list(chunks(iter(rows)))
    assert [len(p) for p in parts] == [3, 3, 1] and all(
        sum(len(r[1]) for r in p) <= LITERAL_BYTES for p in parts
    )
    many = [("evaluations", "{}")] * 1000  # many small rows: bound, not inlined, so one chunk
    assert [len(p) for p in chunks(iter(many))] == [1000]


TRICKY = {
    "text": "it's \"quoted\", back\\slash, new\nline, tab\t, ünïcødé 🦆, {'not': json}",
    "floats": (0.1 + 0.2, 1e-310, -0.0, 123456789.123456789, 2.0**-1074),
    "payload": {"nested": [1, 2.5, None, "s", {"deep": True}], "none": None, "big": 2**62},
}


def _tricky_batch() -> IterationBatch:
    seed = batches(1, 0, seed=3)[0]
    program = replace(seed.programs[0], code=TRICKY["text"], approach=None, error=None)
    evaluation = seed.evaluations[0]
    rows = tuple(replace(r, score=TRICKY["floats"][k % 5], output=TRICKY["text"], error=None)
                 for k, r in enumerate(evaluation.rows))  # fmt: skip
    return replace(
        seed,
        programs=(program,),
        evaluations=(replace(evaluation, rows=rows), *seed.evaluations[1:]),
        events=(Event(0, "mutation", program.program_id, TRICKY["payload"]),),
        ai_cache=(CachedResponse("key", "AI_COMPLETE", "m", TRICKY["text"], 1, 2, 0.30000000000000004),),
        ai_embeddings=(CachedEmbedding("e", "h", np.array([0.1, -2.5, 1e-30], np.float32), 3),),
    )


def test_values_come_back_exactly_as_duckdb_stores_them(counted: Any) -> None:
    store, _, _ = counted
    batch = _tricky_batch()
    store.write_iteration(batch)
    with DuckDBStore(":memory:") as local:
        local.write_iteration(batch)
        assert store.programs(1) == local.programs(1)
        assert store.row_scores(1, "train") == local.row_scores(1, "train")
        assert store.events(1, "mutation") == local.events(1, "mutation")
        assert store.program_scores(1, "val") == local.program_scores(1, "val")
        theirs, ours = store.ai_cache_entries(), local.ai_cache_entries()
        assert theirs[0] == ours[0]
        assert [e.vector.tolist() for e in theirs[1]] == [e.vector.tolist() for e in ours[1]]
    train = store.table_frame("evaluations", split="train")
    assert {0.1 + 0.2, 2.0**-1074, 1e-310} <= set(train["score"]) and set(train["output"]) == {TRICKY["text"]}


def test_the_ai_cache_keeps_the_first_entry_of_a_key(counted: Any) -> None:
    store, _, _ = counted
    first, second = batches(1, 1, seed=3)[:2]
    entry = CachedResponse("same", "AI_COMPLETE", "m", "first", 1, 1, 1.0)
    store.write_iteration(replace(first, ai_cache=(entry,)))
    store.write_iteration(replace(second, ai_cache=(replace(entry, response="second"),)))
    responses, _ = store.ai_cache_entries()
    assert [r.response for r in responses if r.key == "same"] == ["first"]


def test_local_writes_take_insert_all_only(counted: Any) -> None:
    _, _, session = counted
    with pytest.raises(ValueError, match="INSERT ALL statements only"):
        LocalWrites(session)("DELETE FROM programs WHERE run_id = 1")


def test_the_insert_and_the_recovery_query_parse_as_snowflake_and_keep_to_portable_sql() -> None:
    import sqlglot
    from sqlglot import exp

    staged = {table for table, _ in staged_rows(_tricky_batch(), datetime(2026, 1, 2, 3, 4, 5, 678901))}
    statement = sqlglot.parse_one(insert_all("STAGE", sorted(staged)), read="snowflake")
    assert isinstance(statement, exp.MultitableInserts) and len(statement.expressions) == len(staged)
    assert portability_problems(RECOVER_SQL, DUCKDB.sql, double_columns()) == []
    snowflake = snowflake_query(RECOVER_SQL, {"run_id": 1})
    assert portability_problems(snowflake, SNOWFLAKE.sql, double_columns()) == []


def test_the_counter_follows_what_snowpark_sends_an_account() -> None:
    """The model the counts rest on: an append without `table_exists` runs SHOW TABLES first; a DataFrame of
    many local values is staged through a bound temporary table; a told append runs one statement."""
    session = Session.builder.config("local_testing", True).create()
    try:
        counter = StatementCounter(session)
        small = session.create_dataframe([[1, "a"]], schema=["n", "s"])
        small.write.save_as_table("t", mode="append")
        assert counter.counts == {("other", "action"): 1, ("other", "show_tables"): 1}
        counter.counts.clear()
        small.write.save_as_table("t", mode="append", table_exists=True)
        assert counter.total() == 1
        counter.counts.clear()
        session.create_dataframe([[k, "x"] for k in range(300)], schema=["n", "s"]).write.save_as_table(
            "t", mode="append", table_exists=True
        )
        assert counter.counts == {("other", "action"): 1, ("other", "bind_stage"): 3}
        counter.close()
    finally:
        session.close()


def test_array_and_vector_columns_are_typed_as_an_account_types_them() -> None:
    """The deployed ARRAY column is semi-structured (no element type), so the local tables are created the same
    way; a VECTOR column of a source reads as the list type AI_EMBED returns locally."""
    from snowflake.snowpark import types as t

    from coco_sql.engines.snowflake.sql import duckdb_type, snowpark_type
    from coco_sql.store.table_schema import table_columns

    vector = next(c for c in table_columns()["ai_embeddings"] if c.name == "vector")
    assert (
        vector.type == "REAL[]" and snowpark_type(vector.type) == t.ArrayType()
    )  # FLOAT[] as DuckDB writes it
    assert not snowpark_type(vector.type).structured
    assert (
        duckdb_type(t.VectorType(float, 384)) == "FLOAT[]"
        and duckdb_type(t.VectorType(int, 3)) == "INTEGER[]"
    )
    assert duckdb_type(t.ArrayType(t.StringType())) == "VARCHAR[]"
