"""Algorithm 1 of CoCoEvolve (Appendix C.1), composed from the parts in `search`, `mutate`, `evaluate`, `store`.

    A_0 <- {p_0}, H_0 <- {}
    for t = 1..T:
        p'_t ~ pi(A_{t-1})                       parent policy (search.policies)
        c_t, E_t <- curate / augment              context and live environment (reflect)
        p_t ~ MetaReflect(p'_t, c_t; E_t)         mutator (mutate)
        evaluate p_t on T_t -> S_t, O_t           evaluator (train and val splits)
        H_t <- H_{t-1} + (p_t, T_t, S_t, O_t)     one store transaction
        A_t <- update(A_{t-1}, p_t)               MAP-Elites admission (search.archive)
    return the champion                         the cheapest within one SE of the best (engine.champion)

Reproducibility: iteration t draws from its own RNG streams, seeded by (run seed, t, stream), and all other
state is rebuilt from the tables. A run killed at any moment loses at most the iteration in flight (whose
transaction never committed) and resumes to exactly the state an uninterrupted run would have reached.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from typing import Any

from coco_sql.engine.config import (
    POLICY_STREAM,
    PRIMITIVE_STREAM,
    IterationReport,
    RunConfig,
    RunSummary,
    iteration_rng,
)
from coco_sql.engine.cross_fit import with_honest_train
from coco_sql.engine.deploy_cost import check_cost_prices, judge_child
from coco_sql.engine.minibatch import evaluate_child
from coco_sql.engine.parents import Proposer, nothing_left, propose_from_a_parent
from coco_sql.engine.registry import build_mutator
from coco_sql.engine.run_state import RunState
from coco_sql.engine.spend import Spend, check_prices
from coco_sql.engine.start import keep_ai_cache, score_seed
from coco_sql.errors import ConfigError, StoreError
from coco_sql.evaluate import REPORT_SPLITS, SEARCH_SPLITS, Evaluator
from coco_sql.languages import Language
from coco_sql.llm.routing import AiConfig
from coco_sql.llm.runtime import AiRuntime
from coco_sql.llm.usage import Usage
from coco_sql.mutate import Mutator
from coco_sql.mutate.pace import PrimitiveAwareMutator
from coco_sql.primitives.discovery import PrimitiveState
from coco_sql.reflect.context import ContextBundle
from coco_sql.reflect.curator import Curator
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.reflect.history import HistoryTools
from coco_sql.search import POLICIES, Elite, ParentPolicy, Population
from coco_sql.search.infogain import InfoGainTargets, TargetPicker, UniformTargets
from coco_sql.store import (
    Event,
    IterationBatch,
    LedgerEntry,
    ProgramRecord,
    RunRecord,
    Warehouse,
    program_id_for,
)
from coco_sql.store.committer import Committer
from coco_sql.store.shared_cache import load_cache
from coco_sql.tasks import TaskPack


def make_policy(config: RunConfig) -> ParentPolicy:
    return POLICIES[config.policy]()


def make_mutator(config: RunConfig, language: Language, entry: str | None = None) -> Mutator:
    """The run's mutator; with primitives on, wrapped in PACE's operators (`mutate.pace`)."""
    mutator = build_mutator(config.mutator, language, config.mutator_settings)
    if config.primitives:
        return PrimitiveAwareMutator(mutator, language=language.name, entry=entry)
    return mutator


def make_curator(config: RunConfig, task: TaskPack) -> Curator:
    """InfoGain over each training input's k nearest inputs by text, or uniform targets (Appendix C.3)."""
    if config.targeting == "infogain":
        inputs = task.split("train").inputs
        texts = [" ".join(str(v) for v in row[1:]) for row in inputs.itertuples(index=False)]
        picker: TargetPicker = InfoGainTargets.from_texts(texts)  # O(rows * k) memory, no rows x rows matrix
    else:
        picker = UniformTargets()
    return Curator(picker, history=config.history)


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
        self._history: HistoryTools | None = None  # bound to the run being evolved, during `_run`
        self._chat: AiRuntime | None = None  # the mutator's model runtime, when it calls models

    # -- entry points ----------------------------------------------------------------------------------------
    def start(self, config: RunConfig) -> RunSummary:
        config = config.with_model_aliases(self._given_aliases(), recorded=False)  # recorded in runs.config
        check_prices(config.spend_limit, config.prices, self._models(config))  # before anything is written
        check_cost_prices(config.cost_limit, config.prices, self._models(config, ai_only=True))
        run_id = self.store.next_run_id()
        run = RunRecord(
            run_id=run_id,
            task=self.task.name,
            task_fingerprint=self.task.fingerprint(),
            seed=config.seed,
            budget=config.budget,
            config=config.to_stored(),
        )
        # The run's row is written with its seed's batch (`_commit_seed`), once the seed is scored: a run that
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
        if config.spend_limit is not None:  # every model that spent, and every configured one, needs a price
            check_prices(config.spend_limit, config.prices, self._models(config))
            self._spend(run_id).amount(config.spend_limit, config.prices)
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
        curator = make_curator(config, self.task)
        env = DraftEnvironment(evaluator)
        self._chat = self._chat_runtime(config) if getattr(mutator, "uses_models", False) else None
        try:
            state = RunState.load(self.store, run.run_id, config, self.task)
            pace = self._primitive_state(run, config) if config.primitives else None
            if state.last_iteration < 0:
                try:
                    self._commit_seed(run, config, evaluator, state, pace, new_run=not resumed)
                    self._committer.flush()  # the run's row is in: the history tools read it
                except BaseException:
                    keep_ai_cache(self.store, evaluator)
                    raise
            elif resumed:
                self._committer.submit(
                    IterationBatch(
                        run.run_id,
                        state.last_iteration,
                        events=(
                            Event(
                                state.last_iteration,
                                "run_resumed",
                                payload=self._resumed_payload(state, config),
                            ),
                        ),
                    )
                )
            self._history = HistoryTools(self.store, run.run_id)
            ended = None  # why the run ends before its budget: no parent left to mutate
            for t in range(state.last_iteration + 1, config.budget + 1):
                if config.target is not None and state.best_score() >= config.target:
                    break  # reached the target: the run ends here, and a resume does not go on
                if (stopped := self._spend_stop(run, config, state)) is not None:
                    return stopped
                ended = self._iterate(run, config, t, state, policy, curator, mutator, evaluator, env, pace)
                if ended is not None:
                    break  # nothing left to try: the run ends here, and a resume stops at once too
            self._committer.flush()
            if (
                config.spend_limit is not None
                and self.store.get_run(run.run_id).status != "finished"
                and (stopped := self._spend_stop(run, config, state)) is not None
            ):
                return stopped  # the finish's test scores would spend too
            return self._finish(run, config, state, ai, ended)
        except BaseException:
            with contextlib.suppress(Exception):  # let the batch in flight land; the first error wins
                self._committer.flush()
            with contextlib.suppress(Exception):  # the answers of a conversation cut short replay on resume
                self._save_chat_cache(run)
            raise
        finally:
            evaluator.close()
            if ai is not None:
                ai.close()
            if self._chat is not None:
                self._chat.close()
            self._chat = self._history = None

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

    def _save_chat_cache(self, run: RunRecord) -> None:
        """Write the mutator's new cache entries outside an iteration (the run is stopping mid-iteration)."""
        if self._chat is None or self._history is None:  # no model was asked before the run's row was written
            return
        responses, _ = self._chat.cache.drain()
        if responses:
            last = self.store.last_iteration(run.run_id)
            self.store.write_iteration(IterationBatch(run.run_id, max(last, 0), ai_cache=tuple(responses)))

    @staticmethod
    def _resumed_payload(state: RunState, config: RunConfig) -> dict[str, Any]:
        payload: dict[str, Any] = {"from_iteration": state.last_iteration + 1, "budget": config.budget}
        if config.max_spend is not None:
            payload["max_spend"] = config.max_spend
        return payload

    def _models(self, config: RunConfig, *, ai_only: bool = False) -> list[str]:
        """The models the run is configured to call: the mutator's (its settings' `model` / `*_model`, or the
        `models` an injected mutator declares; not with `ai_only`) and, for a task with AI functions, theirs."""
        models = [] if ai_only else [*config.model_names(), *getattr(self._mutator, "models", ())]
        if self.task.uses_ai:
            ai = self._ai_config or AiConfig.from_environment()
            models += [m for m in (ai.classify_model, ai.completion_model, ai.embedding_model) if m]
        return models

    def _spend(self, run_id: int) -> Spend:
        """What the run has spent so far, from its committed ai_usage rows (every split)."""
        return Spend.from_rows(self.store.report("run_spend", {"run_id": run_id}))

    def _spend_stop(self, run: RunRecord, config: RunConfig, state: RunState) -> RunSummary | None:
        """With a spend limit, after the last committed iteration: None while the run's spending is under the
        limit; once it is reached, the `spend_limit_reached` event is written and the run stops, still
        'running' (a resume under a larger limit goes on). A limit makes each iteration commit before the next
        one starts, so the check reads every row spent so far."""
        limit = config.spend_limit
        if limit is None:
            return None
        self._committer.flush()
        spend = self._spend(run.run_id)
        amount = spend.amount(limit, config.prices)
        if amount < limit.amount:
            return None
        t = state.last_iteration
        event = Event(t, "spend_limit_reached", None, spend.payload(limit, config.prices))
        self._committer.submit(IterationBatch(run.run_id, t, events=(event,)))
        self._committer.flush()
        return self._summary(
            run,
            state,
            stopped=f"spend limit reached: {limit.show(amount)} of {limit} spent by iteration {t}; "
            "the run is paused (resume it with a larger --max-spend)",
        )

    def _ai_runtime(self, config: RunConfig) -> AiRuntime | None:
        """The run's AI runtime, its cache warmed from the store's tables; None when the task uses no AI."""
        if not self.task.uses_ai:
            return None
        return AiRuntime(self._run_ai_config(config), load_cache(self.store))

    @staticmethod
    def _ai_rows(evaluator: Evaluator, program_id: str | None, drafts: Usage | None = None) -> dict[str, Any]:
        """IterationBatch fields for the AI work since the last batch: new cache rows and the drafts' usage.

        The program's own evaluations carry their usage; what else was spent (the mutator's draft tests and
        probes) is `drafts`, taken before those evaluations ran."""
        if evaluator.ai is None:
            return {}
        responses, embeddings = evaluator.ai.cache.drain()
        evaluator.ai.take_spent()  # the evaluations' usage travels with them
        return {
            "ai_cache": tuple(responses),
            "ai_embeddings": tuple(embeddings),
            "drafts_usage": drafts,
            "drafts_program_id": program_id,
        }

    def _commit_seed(
        self,
        run: RunRecord,
        config: RunConfig,
        evaluator: Evaluator,
        state: RunState,
        pace: PrimitiveState | None = None,
        *,
        new_run: bool = False,
    ) -> None:
        """Score the seed program and commit it as iteration 0; with `new_run`, the run's row goes in the same
        batch, so a seed that is rejected or fails writes nothing at all."""
        code = self.task.seed_program
        pid = program_id_for(run.run_id, 0)
        outcomes = score_seed(self.task, evaluator)
        cell = evaluator.language.cell(evaluator.check(code))
        record = ProgramRecord(
            pid,
            run.run_id,
            0,
            None,
            None,
            code,
            self.task.language,
            self.task.dialect,
            0,
            cell,
            "seed program of the task",
            "seed",
            True,
            None,
        )
        elite = Elite(pid, 0, outcomes["val"].score)
        landings = tuple(
            state.archive.try_admit(island, cell, elite, iteration=0, seq=island, reason="seed")
            for island in range(config.islands)
        )
        state.add(record, outcomes)
        rng = iteration_rng(run.seed, 0, PRIMITIVE_STREAM)
        found = pace.discover(code, pid, 0, new_best=True, rng=rng) if pace is not None else ()
        report = IterationReport(
            0,
            config.budget,
            pid,
            None,
            elite.score,
            None,
            True,
            "seed program of the task",
            state.best_score(),
        )
        self._committer.submit(
            IterationBatch(
                run.run_id,
                0,
                new_run=run if new_run else None,
                programs=(record,),
                evaluations=tuple(o.as_split_evaluation(pid) for o in outcomes.values()),
                archive=tuple(entry for entry in landings if entry is not None),
                events=(Event(0, "run_started", pid, {"config": asdict(config), "task": self.task.name}),),
                primitives=found,
                **self._ai_rows(evaluator, pid),
            ),
            lambda: self._progress(report),
        )

    def _iterate(
        self,
        run: RunRecord,
        config: RunConfig,
        t: int,
        state: RunState,
        policy: ParentPolicy,
        curator: Curator,
        mutator: Mutator,
        evaluator: Evaluator,
        env: DraftEnvironment,
        pace: PrimitiveState | None = None,
    ) -> str | None:
        """One iteration, committed behind the next; the reason the run stops when no parent is left, else
        None."""
        clock = time.perf_counter()
        island = (t - 1) % config.islands
        population = Population.from_archive(state.archive, island, state.val_rows)
        draws = iteration_rng(run.seed, t, POLICY_STREAM)  # a redraw takes the stream's next number
        select_ms = _ms_since(clock)
        proposer = Proposer(run.seed, t, state, curator, mutator, env, config.minibatch, self._history,
                            self._chat, pace)  # fmt: skip
        drawn = propose_from_a_parent(proposer, policy, population, draws, state.exhausted)
        exhausted = drawn.events(t, getattr(mutator, "name", "?"))
        # No parent left: the events are recorded at the last committed iteration, which a resume keeps.
        if drawn.parent_id is None:
            at = tuple(replace(e, iteration=state.last_iteration) for e in exhausted)
            self._committer.submit(IterationBatch(run.run_id, state.last_iteration, events=at))
            return nothing_left(population, state.exhausted)
        parent_id, context, sample, proposal = drawn.parent_id, drawn.context, drawn.sample, drawn.proposal
        parent = state.elite(parent_id)
        curate_ms, mutate_ms = proposer.phases["curate"], proposer.phases["mutate"]
        spent = evaluator.ai.take_spent() if evaluator.ai is not None else None
        drafts_usage = _without(spent, proposal.usage) if spent is not None else None

        clock = time.perf_counter()
        gate = None
        if proposal.discarded is not None:  # no child: recorded as an invalid program with the reason
            outcomes = {
                split: evaluator.failed(
                    split, f"discarded: {proposal.discarded}", sample.ids(split) if sample else None
                )
                for split in SEARCH_SPLITS
            }
        elif sample is not None:
            outcomes, gate = evaluate_child(
                evaluator,
                proposal.code,
                sample,
                state.train_rows[parent.program_id],
                state.val_rows[parent.program_id],
            )
        else:
            outcomes = {split: evaluator.evaluate(proposal.code, split) for split in SEARCH_SPLITS}
        if proposal.discarded is None and (
            gate is None or gate.passed
        ):  # whole splits: rows held as examples
            outcomes, variants = with_honest_train(env, evaluator.ai, proposal.code, outcomes)
            if drafts_usage is not None and variants:
                drafts_usage.merge(variants)
        evaluate_ms = _ms_since(clock)
        pid = program_id_for(run.run_id, t)
        cost = judge_child(config.cost_limit, config.prices, outcomes["val"], t, pid)  # under --max-cost
        full = (sample is None or (gate is not None and gate.passed)) and cost.within  # full val, within cost
        ai_rows = self._ai_rows(evaluator, pid, drafts_usage)
        if self._chat is not None:
            chat_cache, _ = self._chat.cache.drain()
            ai_rows["ai_cache"] = (*ai_rows.get("ai_cache", ()), *chat_cache)

        clock = time.perf_counter()
        val = outcomes["val"]
        cell = evaluator.language.cell(val.program) if val.ok and val.program is not None else None
        record = ProgramRecord(
            pid,
            run.run_id,
            t,
            parent.program_id,
            proposal.donor_id,
            proposal.code,
            self.task.language,
            self.task.dialect,
            island,
            cell,
            proposal.approach,
            proposal.strategy,
            val.ok,
            val.error,
        )
        best_before = state.best_score()
        landings = []
        if cell is not None and full:
            elite = Elite(pid, t, val.score)
            if config.admission == "jp":
                entry = state.admit_by_jp(island, cell, elite, outcomes["val"], iteration=t)
            else:
                entry = state.archive.try_admit(island, cell, elite, iteration=t, seq=0, reason="admitted")
            if entry is not None:
                landings.append(entry)
        if t % config.migration_interval == 0:
            landings.extend(state.archive.migrate(t, first_seq=len(landings)))
        state.add(record, outcomes, within_cost=cost.within)
        # the parent's score where the child was judged: on the sample when it stopped there
        reference = parent.score if gate is None or gate.passed else gate.parent
        delta = val.score - reference if val.ok else None
        state.note_targets(pid, proposal.notes.get("targets", ()))
        status = (
            "failed"
            if delta is None
            else "improved"
            if delta > 0
            else "regressed"
            if delta < 0
            else "neutral"
        )
        ledger_entry = LedgerEntry(
            t,
            pid,
            proposal.strategy,
            "hillclimb" if proposal.strategy == "hillclimb" else "direction",
            status,
            reference,
            val.score if val.ok else None,
            delta,
            paradigm=proposal.paradigm,
            note=proposal.approach,
        )
        state.add_ledger(ledger_entry)
        trials = (
            pace.trial(proposal.notes.get("primitive"), t, pid, reference, val.score if val.ok else None)
            if pace is not None
            else ()
        )
        new_best = full and val.ok and val.score > best_before
        rng = iteration_rng(run.seed, t, PRIMITIVE_STREAM)
        found = pace.discover(proposal.code, pid, t, new_best=new_best, rng=rng) if pace is not None else ()
        events = [
            Event(
                t,
                "parent_selected",
                parent.program_id,
                {"island": island, "parent_score": parent.score, "policy": getattr(policy, "name", "?")},
            ),
            Event(t, "curated", pid, _bundle_summary(context)),
            Event(t, "mutation", pid, {"mutator": getattr(mutator, "name", "?"), **proposal.notes}),
            *cost.events,
            *exhausted,
        ]
        if gate is not None:
            events.append(Event(t, "minibatch", pid, gate.as_payload()))
        events.extend(
            Event(t, e.reason, e.program_id, {"island": e.island, "cell": e.cell}) for e in landings
        )
        batch = IterationBatch(
            run.run_id,
            t,
            programs=(record,),
            evaluations=tuple(o.as_split_evaluation(pid) for o in outcomes.values()),
            archive=tuple(landings),
            ledger=(ledger_entry,),
            events=tuple(events),
            agent_turns=proposal.transcript,
            mutator_usage=proposal.usage,
            primitives=found,
            primitive_trials=trials,
            **ai_rows,
        )
        timings = {"select": select_ms, "curate": curate_ms, "mutate": mutate_ms, "evaluate": evaluate_ms}
        report = IterationReport(
            t,
            config.budget,
            pid,
            parent.program_id,
            val.score if val.ok else None,
            parent.score,
            any(e.program_id == pid for e in landings),
            proposal.approach if val.ok else f"invalid: {val.error}",
            state.best_score(),
            timings,
            drawn.skipped_ids,
        )
        self._committer.submit(batch, lambda: self._progress(report))
        # Loop overhead: selection, bookkeeping, and any wait for the previous iteration's commit.
        timings["overhead"] = select_ms + _ms_since(clock)
        return None

    def _primitive_state(self, run: RunRecord, config: RunConfig) -> PrimitiveState:
        task = self.task
        return PrimitiveState.load(
            self.store, run.run_id, language=task.language, dialect=task.dialect, entry=task.entry,
            k=config.primitive_k, generation_every=config.primitive_generation,
        )  # fmt: skip

    def _finish(
        self,
        run: RunRecord,
        config: RunConfig,
        state: RunState,
        ai: AiRuntime | None,
        ended: str | None = None,
    ) -> RunSummary:
        """Score the seed and the champion on the test split (reports only) and mark the run finished; `ended`
        says why it ended before its budget (no parent left), in the `run_finished` event and the summary.

        The report evaluator is a separate one (the search's cannot reach the test split), sharing the run's AI
        runtime and so its warm cache."""
        seed_id = program_id_for(run.run_id, 0)
        champion_id = state.champion_id()
        test_scores = self.store.program_scores(run.run_id, "test")
        pending = [pid for pid in dict.fromkeys((seed_id, champion_id)) if pid not in test_scores]
        if pending or self.store.get_run(run.run_id).status != "finished":
            reporter = Evaluator(self.task, REPORT_SPLITS, ai=ai, language=self._language)
            try:
                evaluations = tuple(
                    reporter.evaluate(state.programs[pid].code, "test", warm=True).as_split_evaluation(pid)
                    for pid in pending
                )
                ai_rows = self._ai_rows(reporter, None)
            finally:
                reporter.close()
            self.store.write_iteration(
                IterationBatch(
                    run.run_id,
                    state.last_iteration,
                    evaluations=evaluations,
                    events=(
                        Event(
                            state.last_iteration,
                            "run_finished",
                            champion_id,
                            {"champion_val_score": state.val_scores[champion_id], "ended": ended},
                        ),
                    ),
                    finish_run=True,
                    **ai_rows,
                )
            )
        return self._summary(run, state, ended)

    def _summary(self, run: RunRecord, state: RunState, stopped: str | None = None) -> RunSummary:
        """The run as its tables hold it now: the champion, and the test scores once they are reported."""
        seed_id = program_id_for(run.run_id, 0)
        choice = state.choice()
        assert choice is not None, "the seed is valid: there is always a champion"
        champion_id, best_id = choice.champion.program_id, choice.best.program_id
        test_scores = self.store.program_scores(run.run_id, "test")
        return RunSummary(
            run_id=run.run_id,
            task=self.task.name,
            iterations=state.last_iteration,
            champion_id=champion_id,
            seed_val_score=state.val_scores[seed_id],
            champion_val_score=state.val_scores[champion_id],
            seed_test_score=test_scores[seed_id].score if seed_id in test_scores else None,
            champion_test_score=test_scores[champion_id].score if champion_id in test_scores else None,
            best_id=best_id,
            best_val_score=state.val_scores[best_id],
            stopped=stopped,
        )


def _without(spent: Usage, mutator: Usage | None) -> Usage:
    """`spent` without the lines and calls of the mutator's own models (a mutator whose chat calls go through
    the evaluator's runtime): those are stored once, with split 'mutator'."""
    if not mutator:
        return spent
    rest = Usage()
    rest.lines = {key: line for key, line in spent.lines.items() if key not in mutator.lines}
    rest.provider_calls = [c for c in spent.provider_calls if (c.function, c.model) not in mutator.lines]
    rest.errors = list(spent.errors)
    return rest


def _bundle_summary(context: ContextBundle) -> dict[str, Any]:
    """What the curator put in c_t, as recorded in the 'curated' event (ids and sizes, no code)."""
    return {
        "history": context.history,
        "targets": list(context.targets),
        "donors": {target: view.program_id for target, view in context.donors.items()},
        "elites": len(context.elites),
        "ledger": len(context.ledger),
        "stagnant": context.stagnant(5),
    }


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0
