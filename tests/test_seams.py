"""The seams are real: the whole loop runs through `coco_sql.api` with a language, a store and a mutator that are
small classes written here, and none of DuckDB, sqlglot or the SQL sandbox.

- `CounterLanguage`: a program is `answer = N`; it answers min(N, x) on every row, no sandbox needed.
- `MemoryStore`: the `Warehouse` protocol over dicts and lists.
- `StepMutator`: proposes `answer = N + 1` from its parent `answer = N`.

The task's rows have x in 0..3 and are labelled x, so the run must climb 0 -> 3 and stop at its target, with every program, score,
ledger line and archive landing in the store, and a resume must pick up exactly where the run stopped.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from coco_sql import api
from coco_sql.errors import CandidateRejected, StoreError
from coco_sql.languages import Program, RunResult
from coco_sql.llm.cache import CachedEmbedding, CachedResponse
from coco_sql.mutate import MutationRequest, Proposal
from coco_sql.store.records import (
    ArchiveEntry,
    DeployUsage,
    Event,
    IterationBatch,
    LedgerEntry,
    ProgramRecord,
    ProgramScore,
    RunRecord,
)
from coco_sql.tasks import Split, TaskPack, load_task

PROGRAM = re.compile(r"answer = (\d+)")
ONE_LINE = {"islands": 1, "policy": "best"}  # always the best parent: the climb is 0, 1, 2, 3


class CounterLanguage:
    name = "counter"

    def validate(self, code: str) -> Program:
        match = PROGRAM.fullmatch(code.strip())
        if match is None:
            raise CandidateRejected("a counter program is `answer = N`")
        return Program(self.name, code, code.strip(), int(match.group(1)))

    def cell(self, program: Program) -> str:
        return f"{min(program.tree, 9)}:0"

    def runner(self, split: Split, ai: object) -> CounterRunner:
        return CounterRunner(dict(zip(split.inputs["id"], split.inputs["x"], strict=True)))


class CounterRunner:
    def __init__(self, xs: dict[str, int]) -> None:
        self.xs = xs

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult:
        return RunResult([(i, min(program.tree, x)) for i, x in self.xs.items()], 0.0)

    def close(self) -> None:
        pass


class StepMutator:
    name = "step"

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        n = int(PROGRAM.fullmatch(request.parent.code.strip()).group(1))  # type: ignore[union-attr]
        return Proposal(f"answer = {n + 1}", f"count up to {n + 1}")


class MemoryStore:
    """The Warehouse protocol over plain Python containers: what the loop needs of a store, and nothing else."""

    write_behind = True

    def __init__(self) -> None:
        self.runs: dict[int, RunRecord] = {}
        self.programs_: dict[int, list[ProgramRecord]] = defaultdict(list)
        self.scores: dict[tuple[int, str], dict[str, ProgramScore]] = defaultdict(dict)
        self.rows: dict[tuple[int, str], dict[str, dict[str, float]]] = defaultdict(dict)
        self.archive: dict[int, list[ArchiveEntry]] = defaultdict(list)
        self.ledger_: dict[int, list[LedgerEntry]] = defaultdict(list)
        self.events_: dict[int, list[Event]] = defaultdict(list)

    def next_run_id(self) -> int:
        return max(self.runs, default=0) + 1

    def create_run(self, run: RunRecord) -> None:
        self.runs[run.run_id] = run

    def get_run(self, run_id: int) -> RunRecord:
        if run_id not in self.runs:
            raise StoreError(f"no run {run_id}")
        return self.runs[run_id]

    def latest_run_id(self, task: str | None = None) -> int | None:
        ids = [r.run_id for r in self.runs.values() if task is None or r.task == task]
        return max(ids, default=None)

    def set_budget(self, run_id: int, budget: int) -> None:
        run = self.runs[run_id]
        self.runs[run_id] = RunRecord(
            run.run_id, run.task, run.task_fingerprint, run.seed, budget, run.config
        )

    def set_config(self, run_id: int, config: Mapping[str, Any]) -> None:
        self.runs[run_id] = replace(self.runs[run_id], config=dict(config))

    def write_iteration(self, batch: IterationBatch) -> None:
        run_id = batch.run_id
        if batch.new_run is not None:  # a new run's row comes with its seed's batch
            self.runs[run_id] = batch.new_run
        self.programs_[run_id].extend(batch.programs)
        for evaluation in batch.evaluations:
            summary = evaluation.summary
            self.scores[run_id, summary.split][summary.program_id] = summary
            self.rows[run_id, summary.split][summary.program_id] = {
                r.instance_id: r.score for r in evaluation.rows
            }
        self.archive[run_id].extend(batch.archive)
        self.ledger_[run_id].extend(batch.ledger)
        self.events_[run_id].extend(batch.events)
        if batch.finish_run:
            run = self.runs[run_id]
            self.runs[run_id] = RunRecord(
                run.run_id,
                run.task,
                run.task_fingerprint,
                run.seed,
                run.budget,
                run.config,
                status="finished",
            )

    def ai_cache_entries(self) -> tuple[list[CachedResponse], list[CachedEmbedding]]:
        return [], []

    def last_iteration(self, run_id: int) -> int:
        return max((p.iteration for p in self.programs_[run_id]), default=-1)

    def programs(self, run_id: int) -> list[ProgramRecord]:
        return sorted(self.programs_[run_id], key=lambda p: p.iteration)

    def program(self, program_id: str) -> ProgramRecord:
        return next(p for ps in self.programs_.values() for p in ps if p.program_id == program_id)

    def program_scores(self, run_id: int, split: str) -> dict[str, ProgramScore]:
        return dict(self.scores[run_id, split])

    def archive_entries(self, run_id: int) -> list[ArchiveEntry]:
        return list(self.archive[run_id])

    def row_scores(
        self, run_id: int, split: str, program_id: str | None = None
    ) -> dict[str, dict[str, float]]:
        rows = self.rows[run_id, split]
        return (
            dict(rows) if program_id is None else {program_id: rows[program_id]} if program_id in rows else {}
        )

    def deploy_usage(self, run_id: int) -> dict[str, DeployUsage]:
        return {
            pid: DeployUsage(pid, s.n_rows) for pid, s in self.scores[run_id, "val"].items()
        }  # no AI here

    def ledger(self, run_id: int) -> list[LedgerEntry]:
        return list(self.ledger_[run_id])

    def events(self, run_id: int, kind: str) -> list[Event]:
        return [e for e in self.events_[run_id] if e.kind == kind]

    def report(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        raise NotImplementedError  # the read models are not part of a run

    def query(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        raise NotImplementedError  # the loop never runs SQL on the store

    def history(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def recover(self, run_id: int) -> None:
        pass  # every write_iteration here is a single assignment

    def candidate_engine(self) -> None:
        return None  # candidates run in the local sandbox

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def threes(tmp_path_factory: pytest.TempPathFactory) -> TaskPack:
    root = tmp_path_factory.mktemp("packs") / "threes"
    (root / "data").mkdir(parents=True)
    (root / "data" / "pool.csv").write_text(
        "id,x,label\n" + "".join(f"r{i},{i % 4},{i % 4}\n" for i in range(64))
    )
    (root / "seed.sql").write_text("answer = 0\n")
    (root / "task.toml").write_text(
        'name = "threes"\ndescription = "every row is a three"\n'
        '[data]\npool = "data/pool.csv"\nexpected_column = "label"\n[data.input_columns]\nx = "INTEGER"\n'
        "[splits]\nseed = 1\ntrain_fraction = 0.5\ntest_fraction = 0.25\n"
        '[contract]\noutput = "label"\ntype = "INTEGER"\n[scorer]\nkind = "exact"\n[program]\nseed = "seed.sql"\n'
    )
    return load_task(root)


def test_the_loop_runs_through_the_api_on_a_fake_language_store_and_mutator(threes: TaskPack) -> None:
    store = MemoryStore()
    seams = {"language": CounterLanguage(), "mutator": StepMutator()}
    summary = api.evolve(threes, db=store, budget=10, options={"seed": 7, "target": 1.0, **ONE_LINE}, **seams)

    assert summary.champion_val_score == 1.0 and summary.seed_val_score < 1.0
    assert summary.iterations == 3  # 0 -> 1 -> 2 -> 3, then the target stops the run
    codes = [p.code for p in store.programs(summary.run_id)]
    assert codes == ["answer = 0\n", "answer = 1", "answer = 2", "answer = 3"]
    assert {p.language for p in store.programs(summary.run_id)} == {"sql"}  # the pack's declared language
    assert [entry.status for entry in store.ledger(summary.run_id)] == ["improved"] * 3
    assert summary.champion_test_score == 1.0 and store.runs[summary.run_id].status == "finished"
    assert any(e.program_id == summary.champion_id for e in store.archive_entries(summary.run_id))
    champion = api.export(summary.run_id, db=store)
    assert (champion.code, champion.val_score) == ("answer = 3", 1.0)

    again = api.resume(summary.run_id, db=store, task=threes, budget=20, **seams)
    assert again.iterations == 3  # the target was reached: a resume does not go on


def test_a_resume_continues_a_run_stopped_by_its_budget(threes: TaskPack) -> None:
    store = MemoryStore()
    seams = {"language": CounterLanguage(), "mutator": StepMutator()}
    first = api.evolve(threes, db=store, budget=1, options={"seed": 7, **ONE_LINE}, **seams)
    assert first.iterations == 1 and first.champion_val_score < 1.0
    resumed = api.resume(db=store, task=threes, budget=5, **seams)
    assert resumed.run_id == first.run_id and resumed.iterations == 5
    codes = [p.code for p in store.programs(first.run_id)]
    assert codes[:4] == ["answer = 0\n", "answer = 1", "answer = 2", "answer = 3"] and len(codes) == 6
    assert store.runs[first.run_id].budget == 5


def test_a_bad_option_is_one_line_and_writes_nothing(threes: TaskPack, tmp_path: Path) -> None:
    store = MemoryStore()
    with pytest.raises(Exception, match="unknown run option 'sede'") as caught:
        api.evolve(threes, db=store, budget=3, options={"sede": 1}, language=CounterLanguage())
    assert "\n" not in str(caught.value) and store.runs == {}
