"""The seams are real: the whole loop runs through `coco_sql.api` with a language, a store and a mutator that are
small classes written here, and none of DuckDB, sqlglot or the SQL sandbox.

- `CounterLanguage`: a program is `answer = N`; it answers min(N, x) on every row, no sandbox needed.
- `MemoryStore`: the `Warehouse` protocol, all four roles, over dicts and lists.
- `StepMutator`: proposes `answer = N + 1` from its parent `answer = N`.

The task's rows have x in 0..3 and are labelled x, so the run must climb 0 -> 3 and stop at its target, with every program, score,
ledger line and archive landing in the store, and a resume must pick up exactly where the run stopped.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
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
from coco_sql.store.base import ROLES, Warehouse
from coco_sql.store.history_sql import QUERIES as HISTORY_QUERIES
from coco_sql.store.named import named_query
from coco_sql.store.records import (
    ArchiveEntry,
    DeployUsage,
    Event,
    IterationBatch,
    LedgerEntry,
    Primitive,
    PrimitiveTrial,
    ProgramRecord,
    ProgramScore,
    RunRecord,
    deploy_usage_of,
)
from coco_sql.store.registered import RegisteredTask, refuse_reuse
from coco_sql.store.report_sql import QUERIES as REPORT_QUERIES
from coco_sql.store.rows import iteration_rows
from coco_sql.store.table_schema import table_columns
from coco_sql.tasks import Split, TaskPack, load_task
from tests.named_query_references import REFERENCES

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
    """The Warehouse protocol, every role of it (`store.base.ROLES`), over plain Python containers. The named
    history and report queries are answered by the pandas references of `tests/named_query_references.py` over
    the rows the batches carried (`store.rows`), so nothing here runs SQL."""

    write_behind = True

    def __init__(self, sources: Mapping[str, pd.DataFrame] | None = None) -> None:
        self.runs: dict[int, RunRecord] = {}
        self.programs_: dict[int, list[ProgramRecord]] = defaultdict(list)
        self.scores: dict[tuple[int, str], dict[str, ProgramScore]] = defaultdict(dict)
        self.rows: dict[tuple[int, str], dict[str, dict[str, float]]] = defaultdict(dict)
        self.archive: dict[int, list[ArchiveEntry]] = defaultdict(list)
        self.ledger_: dict[int, list[LedgerEntry]] = defaultdict(list)
        self.events_: dict[int, list[Event]] = defaultdict(list)
        self.primitives_: dict[int, list[Primitive]] = defaultdict(list)
        self.trials: dict[int, list[PrimitiveTrial]] = defaultdict(list)
        self.tables: dict[str, list[tuple[Any, ...]]] = defaultdict(list)  # every batch's rows, by table
        self.cache: tuple[list[CachedResponse], list[CachedEmbedding]] = ([], [])
        self.progress: dict[int, dict[str, Any]] = {}
        self.sources = dict(sources or {})
        self.tasks: dict[str, RegisteredTask] = {}

    # -- RunWriter -------------------------------------------------------------------------------------------
    def next_run_id(self) -> int:
        return max(self.runs, default=0) + 1

    def create_run(self, run: RunRecord) -> None:
        self.runs[run.run_id] = run

    def set_budget(self, run_id: int, budget: int) -> None:
        self.runs[run_id] = replace(self.runs[run_id], budget=budget, status="running", finished_at=None)

    def set_config(self, run_id: int, config: Mapping[str, Any]) -> None:
        self.runs[run_id] = replace(self.runs[run_id], config=dict(config))

    def set_progress(self, row: Mapping[str, Any]) -> None:
        self.progress[int(row["run_id"])] = dict(row)

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
        self.primitives_[run_id].extend(batch.primitives)
        self.trials[run_id].extend(batch.primitive_trials)
        for table, rows in iteration_rows(batch, datetime(2026, 1, 1)).items():
            self.tables[table].extend(rows)
        self.cache[0].extend(batch.ai_cache)
        self.cache[1].extend(batch.ai_embeddings)
        if batch.finish_run:
            self.runs[run_id] = replace(self.runs[run_id], status="finished")

    def recover(self, run_id: int) -> None:
        pass  # every write_iteration here is a single assignment

    # -- RunReader -------------------------------------------------------------------------------------------
    def get_run(self, run_id: int) -> RunRecord:
        if run_id not in self.runs:
            raise StoreError(f"no run {run_id}")
        return self.runs[run_id]

    def latest_run_id(self, task: str | None = None) -> int | None:
        ids = [r.run_id for r in self.runs.values() if task is None or r.task == task]
        return max(ids, default=None)

    def last_iteration(self, run_id: int) -> int:
        return max((p.iteration for p in self.programs_[run_id]), default=-1)

    def programs(self, run_id: int) -> list[ProgramRecord]:
        return sorted(self.programs_[run_id], key=lambda p: p.iteration)

    def program(self, program_id: str) -> ProgramRecord:
        found = [p for ps in self.programs_.values() for p in ps if p.program_id == program_id]
        if not found:
            raise StoreError(f"no program {program_id!r}")
        return found[0]

    def program_scores(self, run_id: int, split: str) -> dict[str, ProgramScore]:
        return dict(self.scores[run_id, split])

    def row_scores(
        self, run_id: int, split: str, program_id: str | None = None
    ) -> dict[str, dict[str, float]]:
        rows = self.rows[run_id, split]
        return (
            dict(rows) if program_id is None else {program_id: rows[program_id]} if program_id in rows else {}
        )

    def archive_entries(self, run_id: int) -> list[ArchiveEntry]:
        return list(self.archive[run_id])

    def ledger(self, run_id: int) -> list[LedgerEntry]:
        return list(self.ledger_[run_id])

    def events(self, run_id: int, kind: str) -> list[Event]:
        return [e for e in self.events_[run_id] if e.kind == kind]

    def primitives(self, run_id: int) -> list[Primitive]:
        return sorted(self.primitives_[run_id], key=lambda p: (p.created_iteration, p.name))

    def primitive_trials(self, run_id: int) -> list[PrimitiveTrial]:
        return sorted(self.trials[run_id], key=lambda t: (t.iteration, t.program_id, t.operator))

    # -- NamedQueries ----------------------------------------------------------------------------------------
    def history(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self._named("history", HISTORY_QUERIES, name, params)

    def report(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self._named("report", REPORT_QUERIES, name, params)

    def deploy_usage(self, run_id: int) -> dict[str, DeployUsage]:
        usage = self.frames()["ai_usage"]
        usage = usage[(usage.run_id == run_id) & (usage.split == "val")]
        rows = [
            (pid, score.n_rows, model, int(group.calls.sum()),
             int((group.input_tokens + group.cached_input_tokens).sum()),
             int((group.output_tokens + group.cached_output_tokens).sum()))
            for pid, score in self.scores[run_id, "val"].items()
            for model, group in usage[usage.program_id == pid].groupby("model")
        ]  # fmt: skip
        rows += [(pid, score.n_rows, None, 0, 0, 0) for pid, score in self.scores[run_id, "val"].items()]
        return deploy_usage_of(rows)

    def ai_cache_entries(self) -> tuple[list[CachedResponse], list[CachedEmbedding]]:
        return list(self.cache[0]), list(self.cache[1])

    def frames(self) -> dict[str, pd.DataFrame]:
        """Every table as a DataFrame of its columns (`sql/schema.sql`), from the rows written so far."""
        rows = {**self.tables, "runs": [(r.run_id, r.task, r.task_fingerprint, r.seed, r.budget, r.config,
                                          r.status, r.created_at, r.finished_at) for r in self.runs.values()]}  # fmt: skip
        return {
            table: pd.DataFrame(rows.get(table, []), columns=[c.name for c in columns])
            for table, columns in table_columns().items()
        }

    def _named(
        self, kind: str, queries: Mapping[str, str], name: str, params: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        _, bound = named_query(kind, queries, name, params)  # the same one-line errors as a store's
        return REFERENCES[kind][name](self.frames(), bound)

    # -- TaskRegistry ----------------------------------------------------------------------------------------
    def read_source(self, source: str) -> tuple[pd.DataFrame, dict[str, str]]:
        if source not in self.sources:
            raise StoreError(f"the source {source!r} fails: no table {source!r}")
        frame = self.sources[source]
        return frame.copy(), {c: "BIGINT" if frame[c].dtype.kind == "i" else "VARCHAR" for c in frame}

    def register_task(
        self,
        name: str,
        source: str,
        options: Mapping[str, Any],
        types: Mapping[str, str],
        rows: pd.DataFrame,
        test_rows: pd.DataFrame | None = None,
    ) -> None:
        refuse_reuse(name, [r.run_id for r in self.runs.values() if r.task == name])
        self.tasks[name] = RegisteredTask(source, dict(options), dict(types), rows, test_rows)

    def registered_task(self, name: str) -> RegisteredTask | None:
        return self.tasks.get(name)

    # -- the rest of a Warehouse ----------------------------------------------------------------------------
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


def test_the_memory_store_plays_every_role_of_a_warehouse(threes: TaskPack) -> None:
    """Each role's every method is the store's own (none left out, none raising NotImplementedError), and the
    named queries answer over what the run wrote."""
    members = {name for role in (*ROLES, Warehouse) for name in [*vars(role), *role.__annotations__]
               if not name.startswith("_")}  # fmt: skip
    assert {"write_iteration", "history", "registered_task", "primitive_trials"} <= members
    assert all(name in vars(MemoryStore) for name in members), members - set(vars(MemoryStore))
    frame = pd.DataFrame({"id": ["a", "b"], "x": [1, 2], "label": [1, 2]})
    store = MemoryStore({"rows": frame})
    summary = api.evolve(threes, db=store, budget=2, options={"seed": 7, **ONE_LINE}, language=CounterLanguage(),
                         mutator=StepMutator())  # fmt: skip
    params = {"run_id": summary.run_id, "program_id": summary.champion_id, "instance_id": "r1", "split": "val",
              "n": 5, "k": 5, "iteration": 1, "cell": "1:0", "depth": 3}  # fmt: skip
    assert all(isinstance(store.history(name, params), list) for name in HISTORY_QUERIES)
    assert all(isinstance(store.report(name, params), list) for name in REPORT_QUERIES)
    assert next(r["program_id"] for r in store.history("best_programs", params)) == summary.champion_id
    with pytest.raises(StoreError, match="needs parameter"):
        store.history("program", {})
    assert set(store.deploy_usage(summary.run_id)) == set(store.program_scores(summary.run_id, "val"))
    rows, types = store.read_source("rows")
    store.register_task("rows_task", "rows", {"label": "label"}, types, rows)
    assert store.registered_task("rows_task").rows.equals(frame)  # type: ignore[union-attr]
