"""The loop's in-memory mirror of a run's tables: programs, row scores, archive, ledger and target counts.

`RunState.load` rebuilds it from the store, so a resumed run starts from exactly what the tables hold, and it
holds nothing the tables do not. It is also the curator's `HistoryView`: training-row scores and program-level
validation aggregates only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from coco_sql.core.proposal import TESTED_NOTE
from coco_sql.engine.champion import Candidate, Choice, amount, choose
from coco_sql.engine.deploy_cost import DeployCost, cost_measure
from coco_sql.evaluate import Outcome
from coco_sql.reflect.context import ProgramView, StrategyNote
from coco_sql.search import Elite, IslandArchive
from coco_sql.search.infogain import SOLVED
from coco_sql.store import LedgerEntry, ProgramRecord, Warehouse
from coco_sql.store.records import DEPLOY_COST_EVENT, EXHAUSTED_EVENT
from coco_sql.tasks import TaskPack

if TYPE_CHECKING:
    from coco_sql.engine.config import RunConfig


class RunState:
    """The in-memory mirror of a run's tables that the loop needs: programs, scores, archive, ledger, targets.

    It is rebuilt from the store on resume, so it holds nothing the tables do not. It also serves the curator
    as its `HistoryView`: training-row scores and program-level validation aggregates only.
    """

    def __init__(self, config: RunConfig, task: TaskPack) -> None:
        self.config = config
        self.programs: dict[str, ProgramRecord] = {}
        self.val_scores: dict[str, float] = {}
        self.train_ids: tuple[str, ...] = tuple(task.split("train").expected)
        self.val_ids: tuple[str, ...] = tuple(task.split("val").expected)
        self.train_rows: dict[str, np.ndarray] = {}
        self.val_rows: dict[str, np.ndarray] = {}
        self.notes: list[StrategyNote] = []
        self.children_approaches: dict[str, set[str]] = {}
        self.failed_targets: Counter[str] = Counter()
        self.archive = IslandArchive(config.islands)
        self.over_cost: set[str] = set()  # children over the run's deploy-cost limit: never champion
        self.sampled: set[str] = (
            set()
        )  # children a minibatch gate stopped (validation sample only): never champion
        self.costs: dict[str, DeployCost] = {}  # deploy cost of each valid program validated on every row
        self.exhausted: set[str] = set()  # parents the mutator had nothing left for: never drawn again
        self.last_iteration = -1
        self._positions: dict[str, dict[str, int]] = {}  # split -> id -> position, built when first needed

    @classmethod
    def load(cls, store: Warehouse, run_id: int, config: RunConfig, task: TaskPack) -> RunState:
        state = cls(config, task)
        for record in store.programs(run_id):
            state.programs[record.program_id] = record
            state.last_iteration = max(state.last_iteration, record.iteration)
            if record.parent_id is not None and record.approach is not None:
                state.children_approaches.setdefault(record.parent_id, set()).add(record.approach)
        for pid, score in store.program_scores(run_id, "val").items():
            if state.programs[pid].valid:
                state.val_scores[pid] = score.score
            if score.n_rows < len(state.val_ids):
                state.sampled.add(pid)
        for split, ids, rows in (
            ("train", state.train_ids, state.train_rows),
            ("val", state.val_ids, state.val_rows),
        ):
            for pid, by_id in store.row_scores(run_id, split).items():
                rows[pid] = np.array([by_id.get(i, 0.0) for i in ids])
        for entry in store.ledger(run_id):
            state.add_ledger(entry)
        for event in store.events(run_id, "mutation"):
            if event.program_id is not None:
                state.note_targets(event.program_id, event.payload.get("targets", ()))
                state.note_tested(event.program_id, event.payload.get(TESTED_NOTE, ()))
        for event in store.events(run_id, DEPLOY_COST_EVENT):
            if event.program_id is not None and event.payload.get("within") is False:
                state.over_cost.add(event.program_id)
        state.exhausted = {e.program_id for e in store.events(run_id, EXHAUSTED_EVENT) if e.program_id}
        usage = store.deploy_usage(run_id)
        for pid in state.val_scores:
            if pid not in state.sampled and pid in usage:
                state.costs[pid] = DeployCost.of(usage[pid])
        elites = {pid: Elite(pid, state.programs[pid].iteration, s) for pid, s in state.val_scores.items()}
        state.archive = IslandArchive.from_entries(config.islands, store.archive_entries(run_id), elites)
        return state

    def add(self, record: ProgramRecord, outcomes: dict[str, Outcome], *, within_cost: bool = True) -> None:
        """Add a committed program; `within_cost` False marks a child over the run's deploy-cost limit, which
        keeps its scores but is never champion."""
        pid = record.program_id
        self.programs[pid] = record
        if not within_cost:
            self.over_cost.add(pid)
        if record.parent_id is not None and record.approach is not None:
            self.children_approaches.setdefault(record.parent_id, set()).add(record.approach)
        if len(outcomes["val"].ids) < len(self.val_ids):
            self.sampled.add(pid)
        if record.valid:
            self.val_scores[pid] = outcomes["val"].score
            if pid not in self.sampled:
                self.costs[pid] = DeployCost.from_usage(outcomes["val"].usage, len(outcomes["val"].ids))
        for split, rows in (("train", self.train_rows), ("val", self.val_rows)):
            rows[pid] = self.row_scores(outcomes[split], split)
        self.last_iteration = max(self.last_iteration, record.iteration)

    def add_ledger(self, entry: LedgerEntry) -> None:
        self.notes.append(
            StrategyNote(
                entry.iteration,
                entry.strategy,
                entry.kind,
                entry.status,
                entry.score_delta,
                entry.note,
                entry.paradigm,
            )
        )

    def note_tested(self, child_id: str, approaches: Iterable[str]) -> None:
        """The approaches the mutator scored on `child_id`'s parent besides the child's own: tried from it."""
        record = self.programs.get(child_id)
        if record is not None and record.parent_id is not None:
            self.children_approaches.setdefault(record.parent_id, set()).update(str(a) for a in approaches)

    def note_targets(self, child_id: str, targets: Iterable[str | None]) -> None:
        """c(t) of Appendix C.3: count each target the child was made for and does not solve."""
        index = self._index("train")
        for target in targets:
            if target is not None and target in index and self.train_rows[child_id][index[target]] < SOLVED:
                self.failed_targets[target] += 1

    def row_scores(self, outcome: Outcome, split: str) -> np.ndarray:
        """The outcome's score on every row of `split` in split order, 0 on the rows it did not score (a
        minibatch sample's outcome). An outcome of the whole split in split order, the normal case, gives its
        own score array (shared, never changed: nobody writes these arrays); only a sample is looked up."""
        ids = self.train_ids if split == "train" else self.val_ids
        scored = outcome.ids
        if len(scored) == len(ids) and tuple(scored) == ids:
            return outcome.scores
        index = self._index(split)
        scores = np.zeros(len(ids))
        for instance_id, score in zip(scored, outcome.scores.tolist(), strict=True):
            k = index.get(instance_id)
            if k is not None:
                scores[k] = score
        return scores

    def _index(self, split: str) -> dict[str, int]:
        """id -> position in `split`, built once (about 100 MB at a million rows; the two splits of a task
        whose train and val rows are the same, a `shared` task, share one)."""
        if split not in self._positions:
            ids = self.train_ids if split == "train" else self.val_ids
            other = "val" if split == "train" else "train"
            if other in self._positions and self.train_ids == self.val_ids:
                self._positions[split] = self._positions[other]
            else:
                self._positions[split] = {instance: k for k, instance in enumerate(ids)}
        return self._positions[split]

    # -- HistoryView -----------------------------------------------------------------------------------------
    def train_scores(self, program_id: str) -> np.ndarray:
        return self.train_rows[program_id]

    def elite_ids(self) -> list[str]:
        return [e.program_id for e in self.archive.elites()]

    def recent_notes(self, n: int) -> tuple[StrategyNote, ...]:
        return tuple(self.notes[-n:])

    def tried_from(self, parent_id: str) -> frozenset[str]:
        return frozenset(self.children_approaches.get(parent_id, ()))

    def root_id(self, program_id: str) -> str:
        while (parent := self.programs[program_id].parent_id) is not None and parent in self.programs:
            program_id = parent
        return program_id

    def view(self, program_id: str) -> ProgramView:
        return ProgramView(program_id, self.programs[program_id].code, self.val_scores.get(program_id, 0.0))

    # -- reads -----------------------------------------------------------------------------------------------
    def elite(self, program_id: str) -> Elite:
        return Elite(program_id, self.programs[program_id].iteration, self.val_scores[program_id])

    def champion_id(self) -> str:
        """The champion by the run's rule (`engine.champion`, the same rule `status` and exports apply to the
        tables). A child over the run's deploy-cost limit is never champion (`engine.deploy_cost`)."""
        choice = self.choice()
        assert choice is not None, "the seed is valid: there is always a champion"
        return choice.champion.program_id

    def choice(self) -> Choice | None:
        """The champion rule (`engine.champion.choose`) over the eligible programs, their deploy costs in the
        unit the tables would compare them in (`deploy_cost.cost_measure`, over every valid program validated on
        every row, as `champion_of` reads them)."""
        prices = self.config.prices
        limit = self.config.cost_limit
        measure = cost_measure(self.costs.values(), prices, None if limit is None else limit.unit)
        candidates = [
            Candidate(
                pid,
                self.programs[pid].iteration,
                self.val_scores[pid],
                amount(self.costs[pid], measure, prices),
            )
            for pid in self._eligible()
        ]
        return choose(candidates, self.val_rows.__getitem__, self.config.champion, measure)

    def best_score(self) -> float:
        """The best validation score of the programs that may be champion (0 with no valid program): what
        `--target` compares."""
        if not self.over_cost and not self.sampled:
            return max(self.val_scores.values(), default=0.0)
        return max((self.val_scores[pid] for pid in self._eligible()), default=0.0)

    def _eligible(self) -> Iterable[str]:
        """The valid programs that may be champion: all of them, less those over the deploy-cost limit and those
        scored on a validation sample only (admission and the champion rest on full validation)."""
        if not self.over_cost and not self.sampled:
            return self.val_scores
        return (pid for pid in self.val_scores if pid not in self.over_cost and pid not in self.sampled)
