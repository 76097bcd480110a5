"""Stage `record`: H_t <- H_{t-1} + (p_t, T_t, S_t, O_t), one iteration's rows as one batch, and its progress.

Each iteration is one `IterationBatch`: the program, its evaluations, the archive's landings, the ledger line,
the events, the mutator's turns and usage, PACE's trials and discoveries, and the AI rows. The committer writes
it while the next iteration is mutated (write-behind); the progress callback runs once it is committed. The
run's in-memory state (`RunState`) takes the same rows, so it never holds what the tables do not.

Events of an iteration, in order: `parent_selected`, `curated`, `mutation`, the cost verdict's `deploy_cost`,
the `parent_exhausted` of the parents skipped first, `minibatch` (a sampled child), then one per archive landing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from coco_sql.core.proposal import TESTED_NOTE
from coco_sql.engine.config import PRIMITIVE_STREAM, IterationReport, RunConfig, iteration_rng
from coco_sql.engine.run_state import RunState
from coco_sql.engine.stages.admit import Admit
from coco_sql.engine.stages.curate import bundle_summary
from coco_sql.engine.stages.judge import Verdict
from coco_sql.engine.stages.select import Selection
from coco_sql.evaluate import Outcome
from coco_sql.languages import Language
from coco_sql.mutate import Proposal
from coco_sql.primitives.discovery import PrimitiveState
from coco_sql.search import Elite
from coco_sql.store import (
    ArchiveEntry,
    Event,
    IterationBatch,
    LedgerEntry,
    ProgramRecord,
    RunRecord,
    program_id_for,
)
from coco_sql.store.committer import Committer
from coco_sql.store.history_sql import withheld_error
from coco_sql.tasks import TaskPack


@dataclass(frozen=True)
class Judged:
    """Iteration t's child as the stages left it: the program, its parent, what `select` drew (with the
    proposal), the judge's verdict, the archive's landings, and the best score before it."""

    program: ProgramRecord
    parent: Elite
    selection: Selection
    verdict: Verdict
    landings: list[ArchiveEntry]
    best_before: float

    @property
    def proposal(self) -> Proposal:
        proposal = self.selection.found.proposal
        assert proposal is not None, "a judged child has a proposal"
        return proposal


@dataclass(frozen=True)
class Record:
    """Stage `record` for one run: its batches go to `committer`, its reports to `progress`; `names` holds the
    parent policy's and the mutator's names for the events."""

    committer: Committer
    progress: Callable[[IterationReport], None]
    run: RunRecord
    task: TaskPack
    config: RunConfig
    language: Language
    pace: PrimitiveState | None
    policy_name: str
    mutator_name: str

    def program(
        self, t: int, parent: Elite, island: int, proposal: Proposal, verdict: Verdict
    ) -> ProgramRecord:
        """The child's `programs` row; its cell from its validation run (None when that failed)."""
        val = verdict.val
        cell = self.language.cell(val.program) if val.ok and val.program is not None else None
        return ProgramRecord(
            program_id_for(self.run.run_id, t), self.run.run_id, t, parent.program_id, proposal.donor_id,
            proposal.code, self.task.language, self.task.dialect, island, cell, proposal.approach,
            proposal.strategy, val.ok, val.error,
        )  # fmt: skip

    def seed(
        self, state: RunState, outcomes: dict[str, Outcome], cell: str, ai_rows: Callable[[str], dict[str, Any]],
        *, new_run: bool,
    ) -> None:  # fmt: skip
        """Commit the scored seed program as iteration 0, in its cell of every island; with `new_run`, the run's
        row goes in the same batch, so a seed that is rejected or fails writes nothing at all."""
        code = self.task.seed_program
        pid = program_id_for(self.run.run_id, 0)
        record = ProgramRecord(
            pid, self.run.run_id, 0, None, None, code, self.task.language, self.task.dialect, 0, cell,
            "seed program of the task", "seed", True, None,
        )  # fmt: skip
        elite = Elite(pid, 0, outcomes["val"].score)
        landings = Admit.seed(state, cell, elite, self.config.islands)
        state.add(record, outcomes)
        rng = iteration_rng(self.run.seed, 0, PRIMITIVE_STREAM)
        found = self.pace.discover(code, pid, 0, new_best=True, rng=rng) if self.pace is not None else ()
        report = IterationReport(
            0,
            self.config.budget,
            pid,
            None,
            elite.score,
            None,
            True,
            "seed program of the task",
            state.best_score(),
        )
        started = Event(0, "run_started", pid, {"config": asdict(self.config), "task": self.task.name})
        self.committer.submit(
            IterationBatch(
                self.run.run_id,
                0,
                new_run=self.run if new_run else None,
                programs=(record,),
                evaluations=tuple(o.as_split_evaluation(pid) for o in outcomes.values()),
                archive=landings,
                events=(started,),
                primitives=found,
                **ai_rows(pid),
            ),
            lambda: self.progress(report),
        )

    def resumed(self, state: RunState) -> None:
        """The `run_resumed` event, at the last committed iteration."""
        payload: dict[str, Any] = {"from_iteration": state.last_iteration + 1, "budget": self.config.budget}
        if self.config.max_spend is not None:
            payload["max_spend"] = self.config.max_spend
        event = Event(state.last_iteration, "run_resumed", payload=payload)
        self.committer.submit(IterationBatch(self.run.run_id, state.last_iteration, events=(event,)))

    def nothing_left(self, state: RunState, exhausted: list[Event]) -> None:
        """No parent left: the `parent_exhausted` events go in at the last committed iteration, which a resume
        keeps."""
        at = tuple(replace(e, iteration=state.last_iteration) for e in exhausted)
        self.committer.submit(IterationBatch(self.run.run_id, state.last_iteration, events=at))

    def iteration(
        self, t: int, state: RunState, child: Judged, exhausted: list[Event], ai_rows: dict[str, Any],
        timings: dict[str, float],
    ) -> None:  # fmt: skip
        """Add iteration t's child to `state` (program, scores, ledger, targets, PACE) and submit its batch; the
        progress report follows its commit."""
        program, parent, verdict, proposal = child.program, child.parent, child.verdict, child.proposal
        pid, val, landings = program.program_id, verdict.val, child.landings
        state.add(program, verdict.outcomes, within_cost=verdict.cost.within)
        reference = verdict.reference(parent)
        delta = val.score - reference if val.ok else None
        state.note_targets(pid, proposal.notes.get("targets", ()))
        state.note_tested(pid, proposal.notes.get(TESTED_NOTE, ()))
        ledger_entry = LedgerEntry(
            t,
            pid,
            proposal.strategy,
            "hillclimb" if proposal.strategy == "hillclimb" else "direction",
            _status(delta),
            reference,
            val.score if val.ok else None,
            delta,
            paradigm=proposal.paradigm,
            note=proposal.approach,
        )
        state.add_ledger(ledger_entry)
        pace = self.pace
        score = val.score if val.ok else None
        trials = (
            pace.trial(proposal.notes.get("primitive"), t, pid, reference, score) if pace is not None else ()
        )
        new_best = verdict.full and val.ok and val.score > child.best_before
        rng = iteration_rng(self.run.seed, t, PRIMITIVE_STREAM)
        found = pace.discover(proposal.code, pid, t, new_best=new_best, rng=rng) if pace is not None else ()
        island = child.selection.island
        context = child.selection.found.context
        assert context is not None, "a judged child was curated"
        events = [
            Event(
                t,
                "parent_selected",
                parent.program_id,
                {"island": island, "parent_score": parent.score, "policy": self.policy_name},
            ),
            Event(t, "curated", pid, bundle_summary(context)),
            Event(t, "mutation", pid, {"mutator": self.mutator_name, **proposal.notes}),
            *verdict.cost.events,
            *exhausted,
        ]
        if verdict.gate is not None:
            events.append(Event(t, "minibatch", pid, verdict.gate.as_payload()))
        events.extend(
            Event(t, e.reason, e.program_id, {"island": e.island, "cell": e.cell}) for e in landings
        )
        batch = IterationBatch(
            self.run.run_id,
            t,
            programs=(program,),
            evaluations=tuple(o.as_split_evaluation(pid) for o in verdict.outcomes.values()),
            archive=tuple(landings),
            ledger=(ledger_entry,),
            events=tuple(events),
            agent_turns=proposal.transcript,
            mutator_usage=proposal.usage,
            primitives=found,
            primitive_trials=trials,
            **ai_rows,
        )
        report = IterationReport(
            t,
            self.config.budget,
            pid,
            parent.program_id,
            score,
            parent.score,
            any(e.program_id == pid for e in landings),
            proposal.approach if val.ok else f"invalid: {_shown_error(verdict)}",
            state.best_score(),
            timings,
            child.selection.found.skipped_ids,
        )
        self.committer.submit(batch, lambda: self.progress(report))


def _shown_error(verdict: Verdict) -> str:
    """The validation error as the progress line may show it: the message when the training rows gave the same
    one, else its fixed category (it may quote a validation row; `store.history_sql.withheld_error`)."""
    val = verdict.val
    train = verdict.outcomes.get("train")
    message = val.error or ""
    return message if train is not None and train.error == message else withheld_error(message)


def _status(delta: float | None) -> str:
    """The ledger's verdict on a child against its parent."""
    if delta is None:
        return "failed"
    return "improved" if delta > 0 else "regressed" if delta < 0 else "neutral"
