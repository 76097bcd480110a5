"""The loop's stages one at a time (`engine.stages`), each on a real run: lockpicking6 evolved a few iterations in a
real DuckDB store, its state rebuilt from the tables, a real evaluator and the real offline mutator.

Mutators written here (`Tired`, `Wrong`) are test doubles of the mutator interface only: what they return is what
the stage under test reacts to."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from coco_sql.engine import EvolutionLoop, RunConfig, iteration_rng
from coco_sql.engine.config import CURATOR_STREAM, POLICY_STREAM
from coco_sql.engine.run_state import RunState
from coco_sql.engine.stages import (
    Account,
    Admit,
    Attempts,
    Curate,
    Judge,
    Judged,
    Mutate,
    Record,
    Select,
    make_admission,
    make_curator,
    make_policy,
)
from coco_sql.engine.stages.account import check_start, run_models
from coco_sql.engine.stages.admit import JpAdmission, MapElitesAdmission
from coco_sql.engine.stages.curate import bundle_summary
from coco_sql.engine.stages.mutate import drafts_usage
from coco_sql.engine.stages.select import nothing_left
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import ConfigError
from coco_sql.evaluate import SEARCH_SPLITS, Evaluator
from coco_sql.languages.sql.mutate.offline import OfflineMutator
from coco_sql.llm.usage import ProviderCall, Usage
from coco_sql.mutate import MutationRequest, Proposal
from coco_sql.mutate.base import calls_models, declared_models
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.search import Elite, Population
from coco_sql.store import IterationBatch, RunRecord
from coco_sql.store.committer import Committer
from coco_sql.tasks import TaskPack, load_task

CONFIG = RunConfig(seed=4, budget=4, mutator_settings={"max_drafts": 6})


@dataclass
class Run:
    """A committed run and what a stage needs of it."""

    store: DuckDBStore
    task: TaskPack
    config: RunConfig
    run: RunRecord
    state: RunState
    evaluator: Evaluator
    env: DraftEnvironment


@pytest.fixture(scope="module")
def task() -> TaskPack:
    return load_task("lockpicking6")


@pytest.fixture(scope="module")
def evolved_db(tmp_path_factory: pytest.TempPathFactory, task: TaskPack) -> Path:
    """lockpicking6 evolved once for the module; each test works on its own copy."""
    db = tmp_path_factory.mktemp("evolved") / "s.duckdb"
    with DuckDBStore(db) as store:
        EvolutionLoop(store, task).start(CONFIG)
    return db


@pytest.fixture
def evolved(tmp_path: Path, evolved_db: Path, task: TaskPack) -> Iterator[Run]:
    db = tmp_path / "s.duckdb"
    shutil.copyfile(evolved_db, db)
    with DuckDBStore(db) as store:
        run = store.get_run(1)
        config = RunConfig.stored(run)
        evaluator = Evaluator(task, SEARCH_SPLITS)
        try:
            yield Run(store, task, config, run, RunState.load(store, run.run_id, config, task), evaluator,
                      DraftEnvironment(evaluator))  # fmt: skip
        finally:
            evaluator.close()


class Tired:
    """Has nothing left for the parents in `tired`; the offline mutator's child for any other."""

    name = "tired"

    def __init__(self, tired: set[str]) -> None:
        self.tired = tired
        self.inner = OfflineMutator(max_drafts=6)

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        if request.parent.program_id in self.tired:
            return Proposal(request.parent.code, "nothing", exhausted="every edit tried")
        return self.inner.propose(request, rng)


class Wrong:
    """A child that answers 2 on every row: no label is 2, so it is worse than any parent that solves a row."""

    name = "wrong"

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        return Proposal("SELECT id, 2 AS label FROM input", "answer 2 everywhere")


def stages_for(r: Run, mutator: object, *, minibatch: int = 0) -> tuple[Curate, Mutate]:
    curate = Curate(make_curator(r.config, r.task), r.env, r.run.seed)
    return curate, Mutate(mutator, r.env, r.run.seed, minibatch, None, None, None)  # type: ignore[arg-type]


# -- select --------------------------------------------------------------------------------------------------
def test_select_draws_the_policys_parent_from_the_islands_population(evolved: Run) -> None:
    r, t = evolved, 5
    policy = make_policy(r.config)
    curate, mutate = stages_for(r, OfflineMutator(max_drafts=6))
    chosen = Select(policy, r.run.seed, islands=1)(t, r.state, Attempts(t, r.state, curate, mutate))
    population = Population.from_archive(r.state.archive, 0, r.state.val_rows)
    assert chosen.island == 0 and chosen.found.skipped == ()
    assert chosen.found.parent_id == policy.select(population, iteration_rng(r.run.seed, t, POLICY_STREAM))
    assert chosen.found.proposal is not None and chosen.found.proposal.exhausted is None


def test_select_skips_the_parents_the_mutator_has_nothing_for_and_says_when_none_is_left(
    evolved: Run,
) -> None:
    r, t = evolved, 5
    elites = set(r.state.elite_ids())
    policy = make_policy(r.config)
    first = policy.select(
        Population.from_archive(r.state.archive, 0, r.state.val_rows),
        iteration_rng(r.run.seed, t, POLICY_STREAM),
    )
    curate, mutate = stages_for(r, Tired({first}))
    chosen = Select(policy, r.run.seed, 1)(t, r.state, Attempts(t, r.state, curate, mutate))
    assert chosen.found.skipped_ids == (first,) and first in r.state.exhausted
    assert chosen.found.parent_id not in (None, first)
    assert [e.kind for e in chosen.found.events(t, "tired")] == ["parent_exhausted"]

    curate, mutate = stages_for(r, Tired(elites))
    none = Select(policy, r.run.seed, 1)(t + 1, r.state, Attempts(t + 1, r.state, curate, mutate))
    assert none.found.parent_id is None and r.state.exhausted == elites
    assert nothing_left(none.population, r.state.exhausted).startswith("nothing left to try")


# -- curate --------------------------------------------------------------------------------------------------
def test_curate_draws_from_the_iterations_curator_stream(evolved: Run) -> None:
    r = evolved
    curator = make_curator(r.config, r.task)
    parent = r.state.champion_id()
    context = Curate(curator, r.env, r.run.seed)(3, r.state, parent)
    again = curator.bundle(r.state, parent, r.env, iteration_rng(r.run.seed, 3, CURATOR_STREAM))
    assert bundle_summary(context) == bundle_summary(again)
    assert set(context.targets) <= set(r.state.train_ids)  # targets are training rows only
    summary = bundle_summary(context)
    assert set(summary) == {"history", "targets", "donors", "elites", "ledger", "stagnant"}
    assert r.task.seed_program not in str(summary)  # ids and sizes, no code


# -- mutate --------------------------------------------------------------------------------------------------
class Counting:
    """Records how many training rows its environment holds; proposes the parent's code."""

    name = "counting"

    def __init__(self) -> None:
        self.rows: list[int] = []

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        ((count,),) = request.env.probe("SELECT count(*) FROM input").rows
        self.rows.append(count)
        return Proposal(request.parent.code, "the parent")


def test_mutate_works_on_the_minibatch_training_rows_only(evolved: Run) -> None:
    r = evolved
    parent = r.state.champion_id()
    counting = Counting()
    curate, sampled = stages_for(r, counting, minibatch=12)
    context = curate(2, r.state, parent)
    sample, _ = sampled(2, r.state, parent, context)
    assert sample is not None and len(sample.train) == 12 and set(sample.train) <= set(r.state.train_ids)
    assert set(context.targets[:12]) <= set(sample.train)  # the targets are in the sample
    _, whole = stages_for(r, counting)
    assert whole(2, r.state, parent, context)[0] is None
    assert counting.rows == [12, len(r.state.train_ids)]
    assert sampled(2, r.state, parent, context)[0] == sample  # the same iteration draws the same rows


def test_the_drafts_usage_leaves_out_the_mutators_own_calls() -> None:
    assert drafts_usage(None, Proposal("x", "y")) is None  # no AI runtime: nothing to book
    assert not calls_models(OfflineMutator()) and declared_models(OfflineMutator()) == ()

    class Declaring:
        name, models, uses_models = "declaring", ("fake/chat",), True

    assert calls_models(Declaring()) and declared_models(Declaring()) == ("fake/chat",)  # type: ignore[arg-type]


# -- judge ---------------------------------------------------------------------------------------------------
def test_judge_evaluates_a_child_on_every_row_or_stops_it_at_the_minibatch(evolved: Run) -> None:
    r, t = evolved, 5
    parent = r.state.elite(r.state.champion_id())
    judge = Judge(r.evaluator, r.env, r.config)
    child = Proposal(r.task.seed_program, "the seed again")
    whole = judge(t, "1-5", child, None, parent, r.state, None)
    assert whole.gate is None and whole.full and whole.reference(parent) == parent.score
    assert [len(whole.outcomes[s].ids) for s in SEARCH_SPLITS] == [
        len(r.state.train_ids),
        len(r.state.val_ids),
    ]

    curate, mutate = stages_for(r, Wrong(), minibatch=10)
    sample, wrong = mutate(t, r.state, parent.program_id, curate(t, r.state, parent.program_id))
    stopped = judge(t, "1-5", wrong, sample, parent, r.state, None)
    assert stopped.gate is not None and not stopped.gate.passed and not stopped.full
    assert len(stopped.val.ids) == 10 and stopped.reference(parent) == stopped.gate.parent

    discarded = judge(t, "1-5", Proposal("", "none", discarded="no edit"), None, parent, r.state, None)
    assert not discarded.val.ok and discarded.val.error == "discarded: no edit"


def test_judge_gives_each_child_a_deploy_cost_verdict_under_a_limit(evolved: Run) -> None:
    r = evolved
    parent = r.state.elite(r.state.champion_id())
    limited = RunConfig(seed=4, budget=4, max_cost="500 calls")
    verdict = Judge(r.evaluator, r.env, limited)(5, "1-5", Proposal(r.task.seed_program, "s"), None, parent,
                                                 r.state, None)  # fmt: skip
    assert verdict.cost.within and verdict.full  # no AI calls: 0 calls per 1,000 rows
    assert [(e.kind, e.payload["cost"], e.payload["within"]) for e in verdict.cost.events] == [
        ("deploy_cost", 0, True)
    ]


# -- admit ---------------------------------------------------------------------------------------------------
def test_admission_is_a_policy_map_elites_takes_an_empty_cell_jp_only_a_gain(evolved: Run) -> None:
    """A copy of the champion in a new cell: MAP-Elites admits it (the cell is empty); J_p does not, since it
    solves no row the archive does not already solve."""
    r = evolved
    champion = r.state.champion_id()
    val = r.evaluator.evaluate(r.state.programs[champion].code, "val")
    copy = Elite("copy", 9, val.score)
    assert JpAdmission().admit(r.state, 0, "new-cell", copy, val, iteration=9) is None
    entry = MapElitesAdmission().admit(r.state, 0, "new-cell", copy, val, iteration=9)
    assert entry is not None and (entry.program_id, entry.cell, entry.reason) == (
        "copy",
        "new-cell",
        "admitted",
    )
    assert isinstance(make_admission("jp"), JpAdmission)
    with pytest.raises(ConfigError, match="unknown admission 'best': use one of map_elites, jp"):
        make_admission("best")


def test_admit_offers_only_a_child_judged_in_full_then_migrates(evolved: Run) -> None:
    r = evolved
    val = r.evaluator.evaluate(r.task.seed_program, "val")
    admit = Admit(MapElitesAdmission(), migration_interval=3)
    assert admit(4, r.state, 0, "new-cell", None, val) == []  # no elite: not judged in full
    assert admit(4, r.state, 0, None, Elite("x", 4, 1.0), val) == []  # no cell: its validation run failed
    assert [e.program_id for e in admit(4, r.state, 0, "new-cell", Elite("x", 4, 1.0), val)] == ["x"]
    two = RunState(RunConfig(islands=2), r.task)
    assert [e.reason for e in Admit.seed(two, "c", Elite("1-0", 0, 0.5), 2)] == ["seed", "seed"]
    two.archive.place(0, "d", Elite("best", 1, 0.9))
    moved = Admit(MapElitesAdmission(), migration_interval=3)(6, two, 0, None, None, val)
    assert [(e.island, e.program_id, e.reason) for e in moved] == [(1, "best", "migrated")]


# -- account -------------------------------------------------------------------------------------------------
def test_account_stops_a_run_once_its_spending_reaches_the_limit(evolved: Run) -> None:
    r = evolved
    committer = Committer(r.store)
    config = RunConfig(seed=4, budget=4, max_spend="1000 tokens")
    account = Account(r.store, committer, r.run.run_id, config, None, None)
    assert account.spend_stop(r.state) is None  # nothing spent yet
    assert (
        Account(r.store, committer, r.run.run_id, CONFIG, None, None).spend_stop(r.state) is None
    )  # no limit
    usage = Usage()
    usage.miss(ProviderCall("agent", "fake/chat", "fake", 1, 900, 200, latency_ms=1.0), logical_calls=1)
    r.store.write_iteration(IterationBatch(r.run.run_id, r.state.last_iteration, mutator_usage=usage))
    stopped = account.spend_stop(r.state)
    assert stopped is not None and stopped.startswith("spend limit reached: 1,100 tokens of 1,000 tokens")
    assert [e.payload["tokens"] for e in r.store.events(r.run.run_id, "spend_limit_reached")] == [1100]
    assert account.rows("1-5", None) == {}  # no AI runtime, no chat runtime: no AI rows


def test_a_dollar_limit_needs_every_configured_models_price_before_anything_is_written(
    task: TaskPack,
) -> None:
    class Declaring:
        name, models = "declaring", ("fake/chat",)

    config = RunConfig(seed=1, max_spend="$1")
    assert run_models(config, task, None, Declaring()) == ["fake/chat"]  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="fake/chat"):
        check_start(config, task, None, Declaring())  # type: ignore[arg-type]
    check_start(RunConfig(seed=1, max_spend="$1", prices={"fake/chat": [1, 2]}), task, None, Declaring())  # type: ignore[arg-type]


# -- record --------------------------------------------------------------------------------------------------
def test_record_writes_an_iteration_as_one_batch_and_adds_it_to_the_state(evolved: Run) -> None:
    """The stages composed by hand for the next iteration: the batch holds the program, its evaluations, its
    ledger line and its events in the documented order, and the state takes the same rows."""
    r = evolved
    t = r.state.last_iteration + 1
    committer = Committer(r.store)
    curate, mutate = stages_for(r, OfflineMutator(max_drafts=6))
    chosen = Select(make_policy(r.config), r.run.seed, 1)(t, r.state, Attempts(t, r.state, curate, mutate))
    assert chosen.found.parent_id is not None and chosen.found.proposal is not None
    parent, proposal = r.state.elite(chosen.found.parent_id), chosen.found.proposal
    verdict = Judge(r.evaluator, r.env, r.config)(t, f"1-{t}", proposal, None, parent, r.state, None)
    record = Record(committer, lambda report: None, r.run, r.task, r.config, r.evaluator.language, None,
                    "map_elites", "offline")  # fmt: skip
    program = record.program(t, parent, 0, proposal, verdict)
    elite = Elite(program.program_id, t, verdict.val.score)
    landings = Admit(MapElitesAdmission(), 10)(t, r.state, 0, program.cell, elite, verdict.val)
    judged = Judged(program, parent, chosen, verdict, landings, r.state.best_score())
    record.iteration(t, r.state, judged, [], {}, {})
    committer.flush()

    assert r.state.last_iteration == t and r.state.val_scores[program.program_id] == verdict.val.score
    (stored,) = [p for p in r.store.programs(r.run.run_id) if p.iteration == t]
    assert (stored.program_id, stored.parent_id, stored.code) == (f"1-{t}", parent.program_id, proposal.code)
    (line,) = [e for e in r.store.ledger(r.run.run_id) if e.iteration == t]
    assert (line.parent_score, line.child_score) == (parent.score, verdict.val.score)
    kinds = ["parent_selected", "curated", "mutation", *(e.reason for e in landings)]
    for kind in kinds:
        assert [e.program_id for e in r.store.events(r.run.run_id, kind) if e.iteration == t] == [
            parent.program_id if kind == "parent_selected" else f"1-{t}"
        ]
    assert r.store.program_scores(r.run.run_id, "val")[f"1-{t}"].score == verdict.val.score

    record.resumed(r.state)
    committer.flush()
    (resumed,) = r.store.events(r.run.run_id, "run_resumed")
    assert (resumed.iteration, resumed.payload) == (t, {"from_iteration": t + 1, "budget": r.config.budget})
