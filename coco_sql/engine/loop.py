"""Algorithm 1 of CoCoEvolve (Appendix C.1), composed from the parts in `search`, `mutate`, `evaluate`, `store`.

    A_0 <- {p_0}, H_0 <- {}
    for t = 1..T:                               stage (engine.stages)
        p'_t ~ pi(A_{t-1})                       select: parent policy (search.policies)
        c_t, E_t <- curate / augment              curate: context and live environment (reflect)
        p_t ~ MetaReflect(p'_t, c_t; E_t)         mutate: the mutator (mutate)
        evaluate p_t on T_t -> S_t, O_t           judge: evaluator (train and val splits), cost
        A_t <- update(A_{t-1}, p_t)               admit: the admission policy (map_elites | jp)
        H_t <- H_{t-1} + (p_t, T_t, S_t, O_t)     account + record: one store transaction
    return the champion                         the cheapest within one SE of the best (engine.champion)

This module only builds the stages for a run and calls them in that order; each stage is a small object in
`engine.stages` with its own tests.

Reproducibility: iteration t draws from its own RNG streams, seeded by (run seed, t, stream), and all other
state is rebuilt from the tables. A run killed at any moment loses at most the iteration in flight (whose
transaction never committed) and resumes to exactly the state an uninterrupted run would have reached.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from coco_sql.engine.config import IterationReport, RunConfig, RunSummary
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
    Stages,
    make_admission,
    make_curator,
    make_mutator,
    make_policy,
)
from coco_sql.engine.stages.account import ai_rows, check_resume, check_start
from coco_sql.engine.stages.finish import finish, summary
from coco_sql.engine.stages.mutate import drafts_usage
from coco_sql.engine.stages.select import nothing_left
from coco_sql.engine.start import keep_ai_cache, score_seed
from coco_sql.errors import ConfigError, StoreError
from coco_sql.evaluate import SEARCH_SPLITS, Evaluator
from coco_sql.languages import Language
from coco_sql.llm.routing import AiConfig
from coco_sql.llm.runtime import AiRuntime
from coco_sql.mutate import Mutator
from coco_sql.mutate.base import calls_models
from coco_sql.primitives.discovery import PrimitiveState
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.reflect.history import HistoryTools
from coco_sql.search import Elite, ParentPolicy
from coco_sql.store import RunRecord, Warehouse, program_id_for
from coco_sql.store.committer import Committer
from coco_sql.store.shared_cache import load_cache
from coco_sql.tasks import TaskPack


class EvolutionLoop:
    """Runs (or resumes) one evolution run of `task` in `store`."""

    def __init__(
        self,
        store: Warehouse,
        task: TaskPack,
        *,
        policy: ParentPolicy | None = None,
        mutator: Mutator | None = None,
        progress: Callable[[IterationReport], None] | None = None,
        ai_config: AiConfig | None = None,
        language: Language | None = None,
    ) -> None:
        self.store = store
        self.task = task
        self._language = language
        self._ai_config = ai_config
        self._policy = policy
        self._mutator = mutator
        self._progress = progress or (lambda report: None)
        self._committer = Committer(store)  # write-behind: iteration t commits while t + 1 is mutated

    # -- entry points ----------------------------------------------------------------------------------------
    def start(self, config: RunConfig) -> RunSummary:
        config = config.with_model_aliases(self._given_aliases(), recorded=False)  # recorded in runs.config
        check_start(config, self.task, self._ai_config, self._mutator)  # before anything is written
        run_id = self.store.next_run_id()
        run = RunRecord(
            run_id=run_id,
            task=self.task.name,
            task_fingerprint=self.task.fingerprint(),
            seed=config.seed,
            budget=config.budget,
            config=config.to_stored(),
        )
        # The run's row is written with its seed's batch (`Record.seed`), once the seed is scored: a run that
        # fails before that (a rejected seed, one that fails on validation) leaves no row and no event behind.
        return self._run(run, config, resumed=False)

    def resume(
        self,
        run_id: int,
        budget: int | None = None,
        *,
        max_spend: int | str | None = None,
        prices: Mapping[str, Any] | None = None,
    ) -> RunSummary:
        """Continue run `run_id`, to a larger `budget` if given. `max_spend` replaces the run's spend limit and
        `prices` are added to its prices (both stored in `runs.config`); a run stopped by its limit goes on
        under a larger one. Every check happens before anything is written."""
        run = self.store.get_run(run_id)
        if run.task != self.task.name:
            raise StoreError(f"run {run_id} evolved task {run.task!r}, not {self.task.name!r}")
        if run.task_fingerprint != self.task.fingerprint():
            raise StoreError(
                f"task pack {self.task.name!r} changed since run {run_id} started; "
                "resuming would mix two tasks (start a new run instead)"
            )
        config = RunConfig.stored(run)
        stored = config.to_stored()
        config = config.with_model_aliases(self._given_aliases(), recorded=True)  # may add, never change
        if max_spend is not None or prices:
            config = replace(
                config,
                max_spend=config.max_spend if max_spend is None else max_spend,
                prices={**config.prices, **dict(prices or {})},
            )
        check_resume(self.store, run_id, config, self.task, self._ai_config, self._mutator)
        self.store.recover(run_id)
        new_budget = budget if budget is not None and budget != config.budget else None
        if new_budget is not None and new_budget < self.store.last_iteration(run_id):
            raise ConfigError(
                f"run {run_id} already has {self.store.last_iteration(run_id)} iterations; "
                f"--budget {new_budget} cannot shrink it"
            )
        if config.to_stored() != stored:
            self.store.set_config(run_id, config.to_stored())
        if new_budget is not None:
            config = replace(config, budget=new_budget)
            self.store.set_budget(run_id, new_budget)
        return self._run(run, config, resumed=True)

    # -- the loop --------------------------------------------------------------------------------------------
    def _run(self, run: RunRecord, config: RunConfig, *, resumed: bool) -> RunSummary:
        ai = self._ai_runtime(config)
        evaluator = Evaluator(self.task, SEARCH_SPLITS, ai=ai, language=self._language)
        policy = self._policy or make_policy(config)
        mutator = self._mutator or make_mutator(config, evaluator.language, self.task.entry)
        admit = Admit(make_admission(config.admission), config.migration_interval)
        curator = make_curator(config, self.task)
        env = DraftEnvironment(evaluator)
        chat = self._chat_runtime(config) if calls_models(mutator) else None  # the mutator's models
        account: Account | None = None  # once the run's row is in
        try:
            state = RunState.load(self.store, run.run_id, config, self.task)
            pace = self._primitive_state(run, config) if config.primitives else None
            record = Record(self._committer, self._progress, run, self.task, config, evaluator.language, pace,
                            policy.name, mutator.name)  # fmt: skip
            if state.last_iteration < 0:
                try:
                    outcomes = score_seed(self.task, evaluator)
                    cell = evaluator.language.cell(evaluator.check(self.task.seed_program))
                    record.seed(
                        state, outcomes, cell, lambda pid: ai_rows(evaluator.ai, pid), new_run=not resumed
                    )
                    self._committer.flush()  # the run's row is in: the history tools read it
                except BaseException:
                    keep_ai_cache(self.store, evaluator)
                    raise
            elif resumed:
                record.resumed(state)
            history = HistoryTools(self.store, run.run_id)
            account = Account(self.store, self._committer, run.run_id, config, evaluator.ai, chat)
            stages = Stages(
                Select(policy, run.seed, config.islands),
                Curate(curator, env, run.seed),
                Mutate(mutator, env, run.seed, config.minibatch, history, chat, pace),
                Judge(evaluator, env, config),
                admit,
                account,
                record,
            )
            ended = None  # why the run ends before its budget: no parent left to mutate
            for t in range(state.last_iteration + 1, config.budget + 1):
                if config.target is not None and state.best_score() >= config.target:
                    break  # reached the target: the run ends here, and a resume does not go on
                if (stopped := account.spend_stop(state)) is not None:
                    return summary(self.store, self.task, run, state, stopped)
                ended = self._iterate(run.run_id, t, stages, state)
                if ended is not None:
                    break  # nothing left to try: the run ends here, and a resume stops at once too
            self._committer.flush()
            if (
                config.spend_limit is not None
                and self.store.get_run(run.run_id).status != "finished"
                and (stopped := account.spend_stop(state)) is not None
            ):
                return summary(self.store, self.task, run, state, stopped)  # the test scores would spend too
            return finish(self.store, self.task, run, state, ai, self._language, ended)
        except BaseException:
            with contextlib.suppress(Exception):  # let the batch in flight land; the first error wins
                self._committer.flush()
            with contextlib.suppress(Exception):  # the answers of a conversation cut short replay on resume
                if account is not None:
                    account.save_chat_cache()
            raise
        finally:
            evaluator.close()
            if ai is not None:
                ai.close()
            if chat is not None:
                chat.close()

    def _iterate(self, run_id: int, t: int, s: Stages, state: RunState) -> str | None:
        """One iteration, committed behind the next; the reason the run stops when no parent is left, else
        None."""
        attempts = Attempts(t, state, s.curate, s.mutate)
        chosen = s.select(t, state, attempts)
        found = chosen.found
        exhausted = found.events(t, s.mutate.mutator.name)
        if found.parent_id is None or found.proposal is None:
            s.record.nothing_left(state, exhausted)
            return nothing_left(chosen.population, state.exhausted)
        parent, proposal = state.elite(found.parent_id), found.proposal
        drafts = drafts_usage(s.judge.evaluator.ai, proposal)
        verdict = s.judge(t, program_id_for(run_id, t), proposal, found.sample, parent, state, drafts)
        rows = s.account.rows(program_id_for(run_id, t), drafts)

        clock = time.perf_counter()
        program = s.record.program(t, parent, chosen.island, proposal, verdict)
        best_before = state.best_score()
        elite = Elite(program.program_id, t, verdict.val.score) if verdict.full else None
        landings = s.admit(t, state, chosen.island, program.cell, elite, verdict.val)
        phases = attempts.phases
        timings = {
            "select": chosen.ms,
            "curate": phases["curate"],
            "mutate": phases["mutate"],
            "evaluate": verdict.ms,
        }
        judged = Judged(program, parent, chosen, verdict, landings, best_before)
        s.record.iteration(t, state, judged, exhausted, rows, timings)
        # Loop overhead: selection, bookkeeping, and any wait for the previous iteration's commit.
        timings["overhead"] = chosen.ms + (time.perf_counter() - clock) * 1000.0
        return None

    # -- the run's runtimes ----------------------------------------------------------------------------------
    def _ai_runtime(self, config: RunConfig) -> AiRuntime | None:
        """The run's AI runtime, its cache warmed from the store's tables; None when the task uses no AI."""
        if not self.task.uses_ai:
            return None
        return AiRuntime(self._run_ai_config(config), load_cache(self.store))

    def _chat_runtime(self, config: RunConfig) -> AiRuntime:
        """The mutator's model runtime: its response cache is the store's (shared, content-addressed), so a
        resumed run replays the turns it has already had answered."""
        return AiRuntime(self._run_ai_config(config), load_cache(self.store))

    def _run_ai_config(self, config: RunConfig) -> AiConfig:
        """What the run's AI calls use: the given AiConfig (else the environment's) with the run's seed and the
        model aliases recorded with the run, so that a resume answers each model name as the run began."""
        ai_config = self._ai_config or AiConfig.from_environment()
        return replace(ai_config, seed=config.seed, model_aliases=config.model_aliases)

    def _given_aliases(self) -> dict[str, str]:
        """The model aliases the caller configured (CLI, file, api), to add to the run's."""
        return dict(self._ai_config.model_aliases) if self._ai_config is not None else {}

    def _primitive_state(self, run: RunRecord, config: RunConfig) -> PrimitiveState:
        task = self.task
        return PrimitiveState.load(
            self.store, run.run_id, language=task.language, dialect=task.dialect, entry=task.entry,
            k=config.primitive_k, generation_every=config.primitive_generation,
        )  # fmt: skip
