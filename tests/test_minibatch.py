"""Minibatch evaluation (Algorithm 1's T_t): a sampled gate before full validation, on real lockpicking6 runs.

A mutator that alternates real offline-mutator children with a program that answers nothing right shows both sides
of the gate: good children are validated in full and admitted, the broken ones stop at the sample, store only the
sampled rows and never enter the archive. A resumed run equals an uninterrupted one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pytest

from coco_sql import api
from coco_sql.engine.champion import champion_of
from coco_sql.engine.config import RunSummary
from coco_sql.engine.minibatch import Minibatch
from coco_sql.engine.registry import build_mutator
from coco_sql.errors import ConfigError
from coco_sql.languages import language_for
from coco_sql.mutate import MutationRequest, Mutator, Proposal
from coco_sql.tasks import load_task

BROKEN = "SELECT id, 99 AS label FROM input"
OPTIONS = {"seed": 1, "minibatch": 30, "islands": 1, "policy": "best"}


class Alternating:
    """Odd iterations: the offline mutator's child; even iterations: a program that gets every row wrong."""

    name = "alternating"

    def __init__(self) -> None:
        self.offline: Mutator = build_mutator("offline", language_for(load_task("lockpicking6")), {})
        self.rows_seen: dict[int, int] = {}  # iteration -> training rows in the mutator's environment

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        (count,), = request.env.probe("SELECT count(*) FROM input").rows  # fmt: skip
        self.rows_seen[request.iteration] = count
        if request.iteration % 2 == 0:
            return Proposal(BROKEN, "answer 99 everywhere")
        return self.offline.propose(request, rng)


def rows(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


@dataclass(frozen=True)
class Whole:
    """An uninterrupted minibatch run of 6 iterations (which the tests only read), its mutator and summary."""

    db: Path
    mutator: Alternating
    summary: RunSummary


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Whole:
    db = tmp_path_factory.mktemp("minibatch") / "whole.duckdb"
    mutator = Alternating()
    summary = api.evolve("lockpicking6", db=db, budget=6, options=OPTIONS, mutator=mutator)
    return Whole(db, mutator, summary)


def test_the_sample_is_drawn_from_the_seed_holds_the_targets_and_is_skipped_when_it_is_everything() -> None:
    train = [f"t{i:03d}" for i in range(100)]
    val = [f"v{i:03d}" for i in range(80)]
    one = Minibatch.draw(10, train, val, ["t050", "t007"], np.random.default_rng(3))
    assert one == Minibatch.draw(10, train, val, ["t050", "t007"], np.random.default_rng(3))
    assert one is not None and len(one.train) == len(one.val) == 10
    assert {"t050", "t007"} <= set(one.train) and list(one.train) == sorted(one.train)
    assert Minibatch.draw(100, train, val, [], np.random.default_rng(3)) is None


def test_children_worse_on_the_sample_stop_there_and_the_rest_are_validated_in_full(whole: Whole) -> None:
    db, mutator, summary = whole.db, whole.mutator, whole.summary
    assert set(mutator.rows_seen.values()) == {30}  # the mutator works on the training sample only
    gates = {
        it: json.loads(p)
        for it, p in rows(db, "SELECT iteration, payload FROM events WHERE kind = 'minibatch'")
    }
    scored = dict(rows(db, "SELECT p.iteration, s.n_rows FROM program_scores s JOIN programs p USING (program_id) "
                           "WHERE s.split = 'val'"))  # fmt: skip
    admitted = {
        it
        for (it,) in rows(db, "SELECT p.iteration FROM archive_entries a JOIN programs p USING (program_id)")
    }
    stopped = [it for it, gate in gates.items() if not gate["full"]]
    assert stopped and all(it % 2 == 0 for it in stopped)  # only the broken programs stop at the gate
    for it in stopped:
        assert gates[it]["child"] < gates[it]["parent"] and scored[it] == 30 and it not in admitted
    for it, gate in gates.items():  # full: a gain on the training sample, no loss on the validation sample
        passed = gate["child_train"] > gate["parent_train"] and gate["child"] >= gate["parent"]
        assert gate["full"] == passed and (scored[it] == 50) == passed
    (status, delta), = rows(db, f"SELECT status, score_delta FROM ledger WHERE iteration = {stopped[0]}")  # fmt: skip
    assert status == "regressed" and delta == pytest.approx(-gates[stopped[0]]["parent"])
    assert summary.champion_val_score > summary.seed_val_score


def test_a_resumed_minibatch_run_equals_an_uninterrupted_one(tmp_path: Path, whole: Whole) -> None:
    api.evolve("lockpicking6", db=tmp_path / "a.duckdb", budget=3, options=OPTIONS, mutator=Alternating())
    api.resume(db=tmp_path / "a.duckdb", budget=6, mutator=Alternating())
    for sql in (
        "SELECT iteration, code, valid FROM programs ORDER BY iteration",
        "SELECT program_id, split, instance_id, score FROM evaluations WHERE split <> 'test' ORDER BY ALL",
        "SELECT iteration, payload FROM events WHERE kind = 'minibatch' ORDER BY iteration",
    ):
        assert rows(tmp_path / "a.duckdb", sql) == rows(whole.db, sql), sql


def test_a_negative_minibatch_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"option 'minibatch' must be an integer in \[0, 1000000\] \(got -1\)"
    ):
        api.evolve("lockpicking6", db=tmp_path / "x.duckdb", budget=1, options={"minibatch": -1})


def test_a_child_scored_on_a_validation_sample_is_never_champion(whole: Whole) -> None:
    """Its sample's mean can beat the champion's full score; admission and the champion rest on full
    validation, in the run state and in the store alike."""
    from coco_sql.engine.config import RunConfig
    from coco_sql.engine.run_state import RunState
    from coco_sql.engines.duckdb.store import DuckDBStore
    from coco_sql.evaluate import Evaluator
    from coco_sql.store import ProgramRecord

    task = load_task("lockpicking6")
    evaluator = Evaluator(task)
    try:
        seed = {split: evaluator.evaluate(task.seed_program, split) for split in ("train", "val")}
        solved = [i for i, s in zip(seed["val"].ids, seed["val"].scores, strict=True) if s == 1.0]
        assert solved and seed["val"].score < 1.0
        sample = {
            "train": evaluator.evaluate(task.seed_program, "train", seed["train"].ids[:5]),
            "val": evaluator.evaluate(task.seed_program, "val", solved),
        }
    finally:
        evaluator.close()
    assert sample["val"].score == 1.0  # better than the seed's full score, on its sample
    state = RunState(RunConfig(), task)
    record = ProgramRecord("1-0", 1, 0, None, None, task.seed_program, "sql", "duckdb", 0, "0:0", None, "seed", True, None)  # fmt: skip
    state.add(record, seed)
    state.add(ProgramRecord("1-1", 1, 1, "1-0", None, task.seed_program, "sql", "duckdb", 0, "0:0", "x", "hillclimb", True, None), sample)  # fmt: skip
    assert state.champion_id() == "1-0" and state.best_score() == seed["val"].score
    # the same from the tables, as a resumed run and the CLI read them
    db = whole.db
    with DuckDBStore(db, read_only=True) as store:
        found = champion_of(store, 1)
        assert found is not None
        champion = store.program(found.champion.program_id)
        full = rows(db, "SELECT max(n_rows) FROM program_scores WHERE split = 'val'")[0][0]
        (n,) = rows(db, f"SELECT n_rows FROM program_scores WHERE split = 'val' AND program_id = '{champion.program_id}'")[0]  # fmt: skip
    assert n == full
