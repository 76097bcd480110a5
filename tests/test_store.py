"""Behaviour of the DuckDB warehouse store on real DuckDB files: schema, views, atomic writes, reads, errors."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from coco_sql.engine.champion import champion_of
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import StoreError
from coco_sql.report import read_models
from coco_sql.store import (
    ArchiveEntry,
    EvaluationRow,
    Event,
    IterationBatch,
    LedgerEntry,
    ProgramRecord,
    ProgramScore,
    RunRecord,
    SplitEvaluation,
    program_id_for,
)

TABLES = ("runs", "programs", "evaluations", "program_scores", "archive_entries", "ledger", "events")
VIEWS = ("leaderboard", "lineage", "row_solvers", "archive")


def program(run_id: int, iteration: int, parent: int | None = None, *, cell: str = "1:0") -> ProgramRecord:
    return ProgramRecord(
        program_id=program_id_for(run_id, iteration),
        run_id=run_id,
        iteration=iteration,
        parent_id=None if parent is None else program_id_for(run_id, parent),
        donor_id=None,
        code=f"SELECT id, {iteration} AS label FROM input",
        language="sql",
        dialect="duckdb",
        island=0,
        cell=cell,
        approach=f"step {iteration}",
        strategy="hillclimb",
        valid=True,
        error=None,
    )


def evaluation(program_id: str, split: str, row_scores: dict[str, float]) -> SplitEvaluation:
    rows = tuple(
        EvaluationRow(
            instance_id=iid,
            score=score,
            output="1",
            expected="1",
            error=None,
            observation={"status": "ok"},
        )
        for iid, score in row_scores.items()
    )
    mean = sum(row_scores.values()) / len(row_scores)
    return SplitEvaluation(ProgramScore(program_id, split, mean, len(rows), 0, 0, 0, 0, 12.5), rows)


def run_record(run_id: int, task: str = "lockpicking6") -> RunRecord:
    return RunRecord(run_id, task, "sha256:abc", seed=7, budget=2, config={"policy": "greedy"})


def batch(
    run_id: int, iteration: int, parent: int | None, scores: dict[str, float], **kw: object
) -> IterationBatch:
    pid = program_id_for(run_id, iteration)
    return IterationBatch(
        run_id=run_id,
        iteration=iteration,
        programs=(program(run_id, iteration, parent),),
        evaluations=(evaluation(pid, "val", scores),),
        ledger=(LedgerEntry(iteration, pid, "hillclimb", "hillclimb", "improved", 0.0, 0.5, 0.5),),
        events=(Event(iteration, "mutation", pid, {"note": "x"}),),
        **kw,  # type: ignore[arg-type]
    )


def counts(store: DuckDBStore) -> dict[str, int]:
    return {t: int(store.query(f"SELECT count(*) AS n FROM {t}").n[0]) for t in TABLES}


@pytest.fixture
def store(store_path: Path) -> Iterator[DuckDBStore]:
    with DuckDBStore(store_path) as opened:
        yield opened


@pytest.fixture
def three_generations(store: DuckDBStore) -> DuckDBStore:
    """Run 1: 1-0 (seed) -> 1-1 -> 1-2 on one cell, with val scores 0.25, 0.5, 1.0 and a test score for 1-2."""
    store.create_run(run_record(1))
    ids = {"a": 0.0, "b": 0.0, "c": 0.0, "d": 1.0}
    seed = batch(1, 0, None, ids, archive=(ArchiveEntry(0, 0, 0, "1:0", "1-0", "seed"),))
    store.write_iteration(seed)
    store.write_iteration(
        batch(1, 1, 0, {**ids, "a": 0.95}, archive=(ArchiveEntry(1, 0, 0, "1:0", "1-1", "admitted"),))
    )
    test = evaluation("1-2", "test", {"t1": 1.0, "t2": 0.0})
    third = batch(
        1,
        2,
        1,
        {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0},
        # two landings in the same iteration and cell: seq decides, not insertion order
        archive=(
            ArchiveEntry(2, 1, 0, "1:0", "1-2", "admitted"),
            ArchiveEntry(2, 0, 0, "1:0", "1-1", "migrated"),
            ArchiveEntry(2, 0, 1, "1:0", "1-0", "migrated"),
        ),
        finish_run=True,
    )
    store.write_iteration(replace(third, evaluations=(*third.evaluations, test)))
    return store


# ---------------------------------------------------------------------------------------------- schema


def test_schema_creation_is_idempotent_and_keeps_rows(store_path: Path) -> None:
    with DuckDBStore(store_path) as first:
        first.create_run(run_record(1))
    with DuckDBStore(store_path) as second:
        names = set(second.query("SELECT table_name FROM information_schema.tables").table_name)
        assert set(TABLES) | set(VIEWS) <= names
        assert second.latest_run_id() == 1


def test_leaderboard_gives_val_and_test_scores_and_ranks(three_generations: DuckDBStore) -> None:
    board = three_generations.query(
        "SELECT program_id, val_score, test_score, train_score, val_rank FROM leaderboard ORDER BY program_id"
    )
    assert board.program_id.tolist() == ["1-0", "1-1", "1-2"]
    assert board.val_score.tolist() == pytest.approx([0.25, 0.4875, 1.0])
    assert board.test_score.isna().tolist() == [True, True, False]
    assert board.test_score[2] == pytest.approx(0.5)
    assert board.train_score.isna().all()
    assert board.val_rank.tolist() == [3, 2, 1]


def test_lineage_walks_a_three_generation_chain(three_generations: DuckDBStore) -> None:
    rows = three_generations.query("SELECT program_id, ancestor_id, depth FROM lineage ORDER BY 1, 3")
    assert list(rows.itertuples(index=False, name=None)) == [
        ("1-1", "1-0", 1),
        ("1-2", "1-1", 1),
        ("1-2", "1-0", 2),
    ]


def test_row_solvers_uses_the_0_9_threshold(three_generations: DuckDBStore) -> None:
    solvers = three_generations.query(
        "SELECT program_id, instance_id FROM row_solvers WHERE split = 'val' AND instance_id = 'a' ORDER BY 1"
    )
    assert solvers.program_id.tolist() == ["1-1", "1-2"]  # 0.95 counts, 0.0 does not
    assert set(
        three_generations.query("SELECT instance_id FROM row_solvers WHERE program_id = '1-0'").instance_id
    ) == {"d"}


def test_archive_view_keeps_the_latest_landing_by_iteration_then_seq(three_generations: DuckDBStore) -> None:
    archive = three_generations.query(
        "SELECT island, cell, program_id, since_iteration, reason FROM archive ORDER BY island"
    )
    assert list(archive.itertuples(index=False, name=None)) == [
        (0, "1:0", "1-2", 2, "admitted"),
        (1, "1:0", "1-0", 2, "migrated"),
    ]


# ------------------------------------------------------------------------------------------- atomicity


def test_duplicate_program_id_inside_a_batch_leaves_no_rows(three_generations: DuckDBStore) -> None:
    store = three_generations
    before = counts(store)
    bad = batch(1, 3, 2, {"a": 1.0}, archive=(ArchiveEntry(3, 0, 5, "2:0", "1-3", "admitted"),))
    bad = replace(bad, programs=(program(1, 3, 2), program(1, 3, 2)))
    with pytest.raises(duckdb.ConstraintException):
        store.write_iteration(bad)
    assert counts(store) == before
    assert store.last_iteration(1) == 2
    store.write_iteration(batch(1, 3, 2, {"a": 1.0}))  # still usable
    assert store.last_iteration(1) == 3


def test_unserialisable_observation_leaves_no_rows(three_generations: DuckDBStore) -> None:
    store = three_generations
    before = counts(store)
    good = batch(1, 3, 2, {"a": 1.0})
    poisoned = EvaluationRow("a", 1.0, "1", "1", None, observation={"bad": object()})
    summary = good.evaluations[0].summary
    bad = replace(good, evaluations=(SplitEvaluation(summary, (poisoned,)),))
    with pytest.raises(TypeError):
        store.write_iteration(bad)
    assert counts(store) == before
    store.write_iteration(good)
    assert counts(store)["programs"] == before["programs"] + 1


def test_finish_run_is_part_of_the_transaction(store: DuckDBStore) -> None:
    store.create_run(run_record(1))
    store.write_iteration(batch(1, 0, None, {"a": 1.0}))
    failing = batch(1, 0, None, {"a": 1.0}, finish_run=True)  # 1-0 already exists
    with pytest.raises(duckdb.ConstraintException):
        store.write_iteration(failing)
    assert store.get_run(1).status == "running"


# --------------------------------------------------------------------------------------------- reads


def test_run_ids_and_iterations_round_trip(store: DuckDBStore) -> None:
    assert store.next_run_id() == 1
    assert store.latest_run_id() is None
    store.create_run(run_record(1, "lockpicking6"))
    store.create_run(run_record(2, "goemotions"))
    store.create_run(run_record(3, "lockpicking6"))
    assert store.next_run_id() == 4
    assert store.latest_run_id() == 3
    assert store.latest_run_id("goemotions") == 2
    assert store.latest_run_id("lockpicking6") == 3
    assert store.latest_run_id("nosuch") is None
    assert store.last_iteration(1) == -1
    store.write_iteration(batch(1, 0, None, {"a": 0.5}))
    store.write_iteration(batch(1, 1, 0, {"a": 1.0}))
    assert store.last_iteration(1) == 1
    assert store.last_iteration(3) == -1
    run = store.get_run(1)
    assert (run.task, run.seed, run.budget, run.config, run.status) == (
        "lockpicking6",
        7,
        2,
        {"policy": "greedy"},
        "running",
    )
    with pytest.raises(StoreError, match="no run 9"):
        store.get_run(9)


def test_programs_scores_and_archive_round_trip(three_generations: DuckDBStore) -> None:
    store = three_generations
    assert store.programs(1) == [program(1, 0), program(1, 1, 0), program(1, 2, 1)]
    assert store.program("1-1") == program(1, 1, 0)
    with pytest.raises(StoreError, match="no program '9-9'"):
        store.program("9-9")
    val = store.program_scores(1, "val")
    assert val["1-2"] == ProgramScore("1-2", "val", 1.0, 4, 0, 0, 0, 0, 12.5)
    assert set(val) == {"1-0", "1-1", "1-2"}
    assert set(store.program_scores(1, "test")) == {"1-2"}
    assert store.program_scores(2, "val") == {}
    assert [(a.iteration, a.seq, a.island, a.program_id) for a in store.archive_entries(1)] == [
        (0, 0, 0, "1-0"),
        (1, 0, 0, "1-1"),
        (2, 0, 0, "1-1"),
        (2, 0, 1, "1-0"),
        (2, 1, 0, "1-2"),
    ]
    assert store.get_run(1).status == "finished"
    assert store.get_run(1).finished_at is not None


def test_evaluation_rows_store_json_observations(three_generations: DuckDBStore) -> None:
    row = three_generations.query(
        "SELECT observation->>'status' AS status, latency_ms FROM evaluations WHERE program_id = '1-0' AND instance_id = 'a'"
    )
    assert row.status.tolist() == ["ok"]


# -------------------------------------------------------------------------------------------- errors


def assert_one_line(error: StoreError) -> None:
    assert "\n" not in str(error) and str(error)


def test_a_file_that_is_not_duckdb_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.duckdb"
    path.write_text("not a database\n" * 200)
    for read_only in (False, True):
        with pytest.raises(StoreError, match="cannot open") as caught:
            DuckDBStore(path, read_only=read_only)
        assert_one_line(caught.value)


def test_read_only_open_of_a_missing_file_raises_and_creates_nothing(store_path: Path) -> None:
    with pytest.raises(StoreError, match="no coco-sql database") as caught:
        DuckDBStore(store_path, read_only=True)
    assert_one_line(caught.value)
    assert not store_path.exists()


def test_a_second_process_holding_the_file_makes_open_fail(store_path: Path) -> None:
    DuckDBStore(store_path).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('held', flush=True); sys.stdin.read()",
            str(store_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for read_only in (False, True):
            with pytest.raises(StoreError, match="cannot open") as caught:
                DuckDBStore(store_path, read_only=read_only)
            assert_one_line(caught.value)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
    DuckDBStore(store_path).close()  # released: opens again


def test_run_overview_and_champion_on_an_empty_and_a_real_run(tmp_path: Path) -> None:
    from coco_sql.engine import EvolutionLoop, RunConfig
    from coco_sql.tasks import load_task

    with DuckDBStore(tmp_path / "s.duckdb") as store:
        store.create_run(RunRecord(1, "lockpicking6", "f", 0, 3, {}))
        assert read_models.status(store) == [
            {"run_id": 1, "task": "lockpicking6", "seed": 0, "budget": 3, "status": "running",
             "iterations": None, "best_val": None, "champion_id": None, "champion_val": None, "best_id": None,
             "champion_rule": None}
        ]  # fmt: skip
        assert champion_of(store, 1) is None
        summary = EvolutionLoop(store, load_task("lockpicking6")).start(
            RunConfig(seed=1, budget=2, mutator_settings={"max_drafts": 4})
        )
        found = champion_of(store, summary.run_id)
        assert found is not None
        assert (found.champion.program_id, found.champion.val_score) == (
            summary.champion_id,
            summary.champion_val_score,
        )
        row = read_models.status(store)[-1]
        assert row["iterations"] == 2 and row["champion_id"] == summary.champion_id == row["best_id"]
        assert row["champion_rule"] == "cheapest_within_se" and row["champion_val"] == row["best_val"]
        board = read_models.leaderboard(store, summary.run_id, n=3)
        assert board[0]["program_id"] == summary.champion_id and len(board) == 3
        assert board[0]["val_score"] == summary.champion_val_score and board[0]["test_score"] is not None
        last = store.programs(summary.run_id)[-1]
        ancestors = read_models.lineage(store, last.program_id)
        assert [a["depth"] for a in ancestors] == list(range(1, len(ancestors) + 1))
        assert ancestors[0]["program_id"] == last.parent_id and ancestors[-1]["iteration"] == 0
        row = store.row_scores(summary.run_id, "train")[summary.champion_id]
        solved = next(i for i, s in row.items() if s >= 0.9)
        solvers = read_models.row_solvers(store, summary.run_id, solved)
        assert summary.champion_id in {s["program_id"] for s in solvers}
        assert all(s["score"] >= 0.9 for s in solvers)
        with pytest.raises(StoreError, match="has no valid program"):
            read_models.champion(store, 1)
