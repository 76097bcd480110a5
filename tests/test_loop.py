"""The evolution loop end to end on real DuckDB: determinism, SIGKILL + resume, archive, and split isolation."""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np
import pytest

from coco_sql.core.proposal import TESTED_NOTE
from coco_sql.engine import EvolutionLoop, RunConfig, iteration_rng
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.evaluate import Evaluator
from coco_sql.languages.sql.mutate.offline import OfflineMutator
from coco_sql.mutate import MutationRequest, ProgramView, Proposal
from coco_sql.reflect import DraftEnvironment
from coco_sql.search import Elite, IslandArchive
from coco_sql.tasks import load_task
from tests.conftest import run_cli

# What must be identical between two runs with the same seed (timestamps and latencies are not).
COMPARED = {
    "programs": "program_id, iteration, parent_id, donor_id, code, island, cell, approach, strategy, valid, error",
    "evaluations": "program_id, split, instance_id, score, output, expected, error, observation",
    "program_scores": "program_id, split, score, n_rows, n_errors",
    "archive_entries": "iteration, seq, island, cell, program_id, reason",
    "ledger": "iteration, program_id, strategy, kind, status, parent_score, child_score, score_delta, note",
}


def snapshot(db: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {
            table: con.execute(f"SELECT {cols} FROM {table} ORDER BY ALL").fetchall()
            for table, cols in COMPARED.items()
        }


def evolve_cli(db: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "coco_sql.cli", "evolve", "lockpicking6", "--db", str(db), *extra]


@pytest.fixture(scope="module")
def lockpicking():
    return load_task("lockpicking6")


@pytest.mark.slow
def test_same_seed_same_run_and_other_seed_differs(tmp_path: Path, lockpicking) -> None:
    config = RunConfig(seed=5, budget=4, mutator_settings={"max_drafts": 6})
    for name in ("a", "b"):
        with DuckDBStore(tmp_path / f"{name}.duckdb") as store:
            EvolutionLoop(store, lockpicking).start(config)
    with DuckDBStore(tmp_path / "c.duckdb") as store:
        EvolutionLoop(store, lockpicking).start(
            RunConfig(seed=6, budget=4, mutator_settings={"max_drafts": 6})
        )
    a, b = (snapshot(tmp_path / f"{n}.duckdb") for n in "ab")
    assert a == b
    # Another seed draws other targets (the greedy search may still converge to the same children).
    curated = "SELECT iteration, payload->'targets' FROM events WHERE kind = 'curated' ORDER BY iteration"
    with (
        duckdb.connect(str(tmp_path / "a.duckdb")) as con_a,
        duckdb.connect(str(tmp_path / "c.duckdb")) as con_c,
    ):
        assert con_a.execute(curated).fetchall() != con_c.execute(curated).fetchall()


@pytest.mark.slow
def test_sigkill_mid_iteration_then_resume_equals_uninterrupted(tmp_path: Path) -> None:
    args = ("--budget", "4", "--seed", "3", "--max-drafts", "8", "--json")
    whole, killed = tmp_path / "whole.duckdb", tmp_path / "killed.duckdb"
    done = run_cli("evolve", "lockpicking6", "--db", whole, *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    process = subprocess.Popen(evolve_cli(killed, *args), stderr=subprocess.PIPE, text=True)  # to be killed
    assert process.stderr is not None
    for line in process.stderr:  # kill as soon as iteration 2 is committed: iteration 3 is in flight
        if line.startswith("[  2/4]"):
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    with duckdb.connect(str(killed), read_only=True) as con:
        (last,) = con.execute("SELECT MAX(iteration) FROM programs").fetchone()
        (status,) = con.execute("SELECT status FROM runs").fetchone()
    assert 2 <= last < 4 and status == "running"

    resumed = run_cli("evolve", "lockpicking6", "--db", killed, "--resume", "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert snapshot(killed) == snapshot(whole)
    whole_summary, resumed_summary = done.stdout.splitlines()[-1], resumed.stdout.splitlines()[-1]
    assert whole_summary == resumed_summary  # same champion and scores


def test_resume_of_a_finished_run_changes_nothing(tmp_path: Path, lockpicking) -> None:
    db = tmp_path / "s.duckdb"
    with DuckDBStore(db) as store:
        first = EvolutionLoop(store, lockpicking).start(
            RunConfig(seed=1, budget=2, mutator_settings={"max_drafts": 4})
        )
    before = snapshot(db)
    with DuckDBStore(db) as store:
        again = EvolutionLoop(store, lockpicking).resume(first.run_id)
    assert again == first
    assert snapshot(db) == before


class _StopAt:
    """A progress callback that interrupts the run once iteration `at` is reported (as Ctrl-C would)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def __call__(self, report) -> None:
        if report.iteration == self.at:
            raise KeyboardInterrupt


def test_a_budget_extended_on_resume_survives_a_second_resume(tmp_path: Path, lockpicking) -> None:
    """runs.budget is the one source of truth: resume --budget 5, interrupted at 4, then resume without it."""
    db = tmp_path / "b.duckdb"
    with DuckDBStore(db) as store:
        run_id = (
            EvolutionLoop(store, lockpicking)
            .start(RunConfig(seed=1, budget=2, mutator_settings={"max_drafts": 4}))
            .run_id
        )
    with DuckDBStore(db) as store, pytest.raises(KeyboardInterrupt):
        EvolutionLoop(store, lockpicking, progress=_StopAt(4)).resume(run_id, budget=5)
    with DuckDBStore(db) as store:
        assert store.last_iteration(run_id) == 4
        summary = EvolutionLoop(store, lockpicking).resume(run_id)
        run = store.get_run(run_id)
    assert summary.iterations == 5 and run.budget == 5 and run.status == "finished"
    assert "budget" not in run.config


def test_offline_mutator_beats_the_lockpicking_seed(tmp_path: Path, lockpicking) -> None:
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        summary = EvolutionLoop(store, lockpicking).start(
            RunConfig(seed=2, budget=12, mutator_settings={"max_drafts": 16})
        )
        ledger = store.query("SELECT status, COUNT(*) AS n FROM ledger GROUP BY status")
    assert summary.champion_val_score >= summary.seed_val_score + 0.2
    assert summary.champion_test_score > summary.seed_test_score
    assert "improved" in set(ledger["status"])


def test_mutator_tests_its_drafts_on_training_rows_before_commit(lockpicking) -> None:
    evaluator = Evaluator(lockpicking)
    env = DraftEnvironment(evaluator)
    parent = ProgramView("1-0", lockpicking.seed_program, 0.02)
    proposal = OfflineMutator(max_drafts=12).propose(MutationRequest(1, parent, env), iteration_rng(0, 1, 1))
    tested = proposal.notes["drafts_tested"]
    assert 1 <= tested <= 12
    assert env.drafts_tested == tested + 1  # the parent once, then every draft
    assert proposal.notes["targets"] and all(
        t in lockpicking.split("train").expected for t in proposal.notes["targets"]
    )
    assert proposal.notes["child_train_score"] == evaluator.evaluate(proposal.code, "train").score
    assert proposal.notes["net_gain"] > 0  # the seed leaves plenty to fix: the committed draft gains
    assert proposal.code != lockpicking.seed_program
    evaluator.close()


def test_archive_admission_migration_and_replay() -> None:
    archive = IslandArchive(2)
    elites = {
        pid: Elite(pid, i, score) for i, (pid, score) in enumerate([("a", 0.5), ("b", 0.5), ("c", 0.6)])
    }
    landings = [archive.try_admit(0, "1:1", elites["a"], iteration=1, seq=0, reason="admitted")]
    assert (
        archive.try_admit(0, "1:1", elites["b"], iteration=2, seq=0, reason="admitted") is None
    )  # a tie keeps a
    landings.append(archive.try_admit(0, "1:1", elites["c"], iteration=3, seq=0, reason="admitted"))
    migrated = archive.migrate(iteration=4, first_seq=0)
    assert [(e.island, e.cell, e.program_id, e.reason) for e in migrated] == [(1, "1:1", "c", "migrated")]
    assert archive.migrate(iteration=5, first_seq=0) == []  # nothing better to move any more

    replayed = IslandArchive.from_entries(2, [*landings, *migrated], elites)
    assert [replayed.cells(i) for i in range(2)] == [archive.cells(i) for i in range(2)]
    assert replayed.best() == elites["c"]


class _RecordingMutator:
    """A real mutator that records what it can see through its environment."""

    name = "recording"

    def __init__(self) -> None:
        self.seen_ids: set[str] = set()

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        result = request.env.probe("SELECT id FROM input")
        self.seen_ids.update(str(row[0]) for row in result.rows)
        outcome = request.env.test_draft(request.parent.code)
        self.seen_ids.update(row.instance_id for row in outcome.rows)
        return Proposal(code=request.parent.code, approach="resubmit the parent")


def test_the_mutator_only_ever_sees_training_rows(tmp_path: Path) -> None:
    pack = tmp_path / "thirds"
    (pack / "data").mkdir(parents=True)
    rows = "\n".join(f"t{n:03d},{n},{int(n % 3 == 0)}" for n in range(90))
    (pack / "data" / "pool.csv").write_text("id,n,label\n" + rows + "\n")
    (pack / "seed.sql").write_text("SELECT id, 0 AS label FROM input\n")
    (pack / "task.toml").write_text(
        'name = "thirds"\ndescription = "multiples of three"\ndialect = "duckdb"\n'
        '[data]\npool = "data/pool.csv"\nid_column = "id"\nexpected_column = "label"\n'
        '[data.input_columns]\nn = "INTEGER"\n'
        '[splits]\nseed = 7\nmode = "partition"\ntrain_fraction = 0.3\ntest_fraction = 0.3\n'
        '[contract]\noutput = "label"\ntype = "INTEGER"\n[scorer]\nkind = "exact"\n'
        '[program]\nseed = "seed.sql"\n'
    )
    task = load_task(pack)
    mutator = _RecordingMutator()
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        EvolutionLoop(store, task, mutator=mutator).start(RunConfig(seed=0, budget=3))
    train = set(task.split("train").expected)
    assert mutator.seen_ids == train
    assert not mutator.seen_ids & (set(task.split("val").expected) | set(task.split("test").expected))


def test_screening_one_query_equals_testing_each_draft(lockpicking) -> None:
    """Batched screening (adds, swaps and drops in one query) gives every draft exactly its own outputs."""
    from coco_sql.languages.sql.mutate.edits import drop_guard, duplicate_guard, swap_guard
    from coco_sql.languages.sql.mutate.screening import screenable, screening_sql, split_by_hypothesis

    evaluator = Evaluator(lockpicking)
    env = DraftEnvironment(evaluator)
    mutator = OfflineMutator()
    query = mutator._parse(lockpicking.seed_program, env)
    target = next(r.instance_id for r in env.test_draft(lockpicking.seed_program).rows if r.score < 1)
    additions = duplicate_guard(
        query, mutator._profile_scopes(query, env, target), mutator._fires(env, target)
    )
    edits = screenable(query, additions[:6] + swap_guard(query, additions[:3]) + drop_guard(query))
    assert {e.operator for e in edits} == {"duplicate_guard", "swap_guard", "drop_guard"}
    result = env.probe(screening_sql(query, edits, "label"))
    for edit, rows in zip(edits, split_by_hypothesis(result.rows, len(edits)), strict=True):
        real = env.test_draft(mutator._render(edit.apply(query), env))
        assert [r.output for r in env.score_outputs(rows).rows] == [r.output for r in real.rows], (
            edit.description
        )
    evaluator.close()


def test_jp_admission_only_admits_children_that_raise_the_archives_jp(tmp_path: Path, lockpicking) -> None:
    from coco_sql.engine.stages.admit import population_jp

    with DuckDBStore(tmp_path / "s.duckdb") as store:
        summary = EvolutionLoop(store, lockpicking).start(
            RunConfig(seed=3, budget=5, mutator_settings={"max_drafts": 6}, admission="jp")
        )
        entries = store.archive_entries(summary.run_id)
        rows = store.row_scores(summary.run_id, "val")
    ids = sorted(lockpicking.split("val").expected)
    vectors = {pid: np.array([by_id[i] for i in ids]) for pid, by_id in rows.items()}
    cells: dict[tuple[int, str], str] = {}
    last = -1.0
    for entry in entries:
        cells[(entry.island, entry.cell)] = entry.program_id
        now = population_jp([vectors[p] for p in dict.fromkeys(cells.values())], len(ids))
        if entry.reason == "admitted":
            assert now > last
        last = now
    assert any(e.reason == "admitted" for e in entries)


@pytest.mark.parametrize(
    ("seed_sql", "message"),
    [
        ("SELECT id, 1 AS label FROM secrets", "the seed program is rejected"),
        ("SELECT id, CAST(code AS INTEGER) // 0 AS label FROM input", "fails on the validation split"),
    ],
    ids=["rejected", "fails on val"],
)
def test_a_seed_that_fails_writes_no_run_and_the_latest_run_resumes(
    tmp_path: Path, copy_pack, seed_sql: str, message: str
) -> None:
    """The run's row is written with its seed's batch: a seed that is rejected or fails leaves no `running` run
    with no programs behind, which became the store's latest run and failed again on every resume."""
    from coco_sql import api
    from coco_sql.errors import TaskError

    db = tmp_path / "runs.duckdb"
    first = api.evolve("lockpicking6", db=db, budget=1, options={"mutator_settings": {"max_drafts": 2}})
    before = snapshot(db)
    pack = copy_pack()
    (pack / "seed.sql").write_text(seed_sql)
    with pytest.raises(TaskError, match=message) as caught:
        api.evolve(pack, db=db, budget=2)
    assert "\n" not in str(caught.value)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT run_id, status FROM runs").fetchall() == [(first.run_id, "finished")]
        assert con.execute("SELECT count(*) FROM events WHERE run_id <> ?", [first.run_id]).fetchone() == (0,)
    assert snapshot(db) == before and [r["run_id"] for r in api.status(db=db)] == [first.run_id]
    assert api.resume(db=db, budget=2).run_id == first.run_id


# -- a mutator with nothing left for a parent (issue 26) ---------------------------------------------------------
def tiny_pack(root: Path) -> Path:
    """A task the seed already solves: after three leaf changes the offline mutator has nothing left to try."""
    (root / "data").mkdir(parents=True)
    (root / "data" / "pool.csv").write_text(
        "id,x,label\n" + "".join(f"r{i},{i % 4},{int(i % 4 == 3)}\n" for i in range(40))
    )
    (root / "seed.sql").write_text("SELECT id, CASE WHEN x = 3 THEN 1 ELSE 0 END AS label FROM input\n")
    (root / "task.toml").write_text(
        'name = "tiny"\ndescription = "x is 3"\ndialect = "duckdb"\n[data]\npool = "data/pool.csv"\n'
        'expected_column = "label"\n[data.input_columns]\nx = "INTEGER"\n[splits]\nseed = 1\n'
        'train_fraction = 0.5\ntest_fraction = 0.25\n[contract]\noutput = "label"\ntype = "INTEGER"\n'
        '[scorer]\nkind = "exact"\n[program]\nseed = "seed.sql"\n'
    )
    return root


def test_the_loop_never_resubmits_a_parent_and_stops_when_none_is_left(tmp_path: Path) -> None:
    task = load_task(tiny_pack(tmp_path / "tiny"))
    db = tmp_path / "t.duckdb"
    with DuckDBStore(db) as store:
        summary = EvolutionLoop(store, task).start(RunConfig(seed=1, budget=12))
        programs = {p.program_id: p for p in store.programs(1)}
        exhausted = store.events(1, "parent_exhausted")
        finished = store.events(1, "run_finished")
        run = store.get_run(1)
    # the offline mutator used to hand the seed back unchanged from iteration 4 on, nine times
    assert all(p.parent_id is None or p.code != programs[p.parent_id].code for p in programs.values())
    assert summary.iterations == 3 and len(programs) == 4 and run.status == "finished"
    assert summary.stopped == (
        "nothing left to try: the mutator has no untried edit for any of the 1 program in the archive "
        "(1 exhausted parent in all)"
    )
    assert [(e.iteration, e.program_id, e.payload["reason"]) for e in exhausted] == [
        (3, "1-0", "no applicable edit")
    ]
    assert finished[0].payload["ended"] == summary.stopped
    with DuckDBStore(db) as store:  # a resume to a larger budget stops at once, adding nothing
        again = EvolutionLoop(store, task).resume(1, budget=20)
        assert len(store.programs(1)) == 4 and len(store.events(1, "parent_exhausted")) == 1
    assert again.stopped == summary.stopped and again.iterations == 3


class TiredOf:
    """The offline mutator, except that it has nothing left for one program (a mutator written for the test, so
    that which parent runs out is fixed)."""

    name = "offline"

    def __init__(self, program_id: str) -> None:
        self.inner = OfflineMutator(max_drafts=6)
        self.program_id = program_id

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        if request.parent.program_id == self.program_id:
            return Proposal(
                request.parent.code, "nothing", notes={"asked": request.iteration}, exhausted="tired"
            )
        return self.inner.propose(request, rng)


def events_of(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT iteration, kind, program_id, payload FROM events WHERE kind IN ('parent_exhausted', "
            "'parent_selected', 'mutation') ORDER BY ALL"
        ).fetchall()


@pytest.mark.slow
def test_an_exhausted_parent_is_never_drawn_again_and_resume_stays_exact(tmp_path: Path, lockpicking) -> None:
    # the roster climbs 1-0, 1-1, 1-2 and draws 1-3 at iteration 4: the mutator has nothing for it, so 1-1 gets
    # the iteration; 1-3 stays the best, and from then on the loop draws another parent without asking again
    config = RunConfig(seed=5, budget=8, mutator_settings={"max_drafts": 6})
    reports: list = []
    with DuckDBStore(tmp_path / "whole.duckdb") as store:
        EvolutionLoop(store, lockpicking, mutator=TiredOf("1-3"), progress=reports.append).start(config)
        programs = {p.program_id: p for p in store.programs(1)}
        (event,) = store.events(1, "parent_exhausted")
        selected = [e.program_id for e in store.events(1, "parent_selected")]
    assert (event.iteration, event.program_id) == (4, "1-3")
    assert event.payload == {"reason": "tired", "mutator": "offline", "asked": 4}
    assert [(r.iteration, r.parent_id, r.exhausted) for r in reports if r.exhausted] == [(4, "1-1", ("1-3",))]
    assert selected[:3] == ["1-0", "1-1", "1-2"] and "1-3" not in selected and len(selected) == 8
    assert all(p.parent_id is None or p.code != programs[p.parent_id].code for p in programs.values())
    # the same run in two halves: the second reads the exhausted parent back from the events
    split = tmp_path / "split.duckdb"
    with DuckDBStore(split) as store:
        EvolutionLoop(store, lockpicking, mutator=TiredOf("1-3")).start(replace(config, budget=4))
    with DuckDBStore(split) as store:
        EvolutionLoop(store, lockpicking, mutator=TiredOf("1-3")).resume(1, budget=8)
    assert searched(split) == searched(tmp_path / "whole.duckdb")
    assert events_of(split) == events_of(tmp_path / "whole.duckdb")


def searched(db: Path) -> dict[str, list[tuple]]:
    """`snapshot` without the test split: a run finished at budget 4 scored its champion of then on test too."""
    return {
        table: [row for row in rows if table not in ("evaluations", "program_scores") or row[1] != "test"]
        for table, rows in snapshot(db).items()
    }


class _Scoring:
    """A mutator that scores three drafts per parent (recorded as `TESTED_NOTE`) and proposes the parent again:
    it records the approaches the loop says were tried from each parent when it is drawn."""

    name = "scoring"

    def __init__(self) -> None:
        self.tried: list[frozenset[str]] = []

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        self.tried.append(request.context.tried)
        k = len(request.context.tried)
        drafts = [f"draft {k + n}" for n in range(3)]
        return Proposal(request.parent.code, drafts[0], notes={TESTED_NOTE: drafts[1:]})


def test_drafts_a_mutator_scored_on_a_parent_count_as_tried_from_it_and_resume_reads_them(
    tmp_path: Path, lockpicking
) -> None:
    # a parent drawn again must not be offered the drafts scored on it before: the child's approach and the
    # other drafts of its batch (a batch that stopped at its first gain left the rest untested)
    config = RunConfig(seed=2, budget=3)
    whole = _Scoring()
    with DuckDBStore(tmp_path / "whole.duckdb") as store:
        EvolutionLoop(store, lockpicking, mutator=whole).start(config)
    assert whole.tried[:3] == [
        frozenset(),
        frozenset({"draft 0", "draft 1", "draft 2"}),
        frozenset({f"draft {n}" for n in range(6)}),
    ]
    halves = _Scoring()
    with DuckDBStore(tmp_path / "split.duckdb") as store:
        EvolutionLoop(store, lockpicking, mutator=halves).start(replace(config, budget=2))
    with DuckDBStore(tmp_path / "split.duckdb") as store:
        EvolutionLoop(store, lockpicking, mutator=halves).resume(1, budget=3)
    assert halves.tried == whole.tried
