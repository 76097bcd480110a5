"""Curate(H_{t-1}): build the context bundle c_t for one iteration (CoCoEvolve Section 2.2, Appendix C.1).

The curator reads the run's history through `HistoryView` (the loop's in-memory mirror of the tables, so that
curation costs no query per iteration) and the parent's training feedback through the environment. With
`history=False` it is parent-local: targets come from the parent's own failures, and no ledger, elite or donor
is shown (the paper's parent-local ablation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

from coco_sql.reflect.context import ContextBundle, ProgramView, StrategyNote
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.search.infogain import SOLVED, TargetingContext, TargetPicker


class HistoryView(Protocol):
    """What the curator may read of the run: training-row scores and program-level aggregates only."""

    train_ids: tuple[str, ...]
    failed_targets: Mapping[str, int]

    def train_scores(self, program_id: str) -> np.ndarray: ...

    def elite_ids(self) -> list[str]: ...

    def view(self, program_id: str) -> ProgramView: ...

    def recent_notes(self, n: int) -> tuple[StrategyNote, ...]: ...

    def tried_from(self, parent_id: str) -> frozenset[str]:
        """Approaches of the parent's children so far."""
        ...

    def root_id(self, program_id: str) -> str:
        """The first program of the lineage (the user's seed)."""
        ...


class Curator:
    def __init__(
        self, picker: TargetPicker, *, history: bool = True, ledger_size: int = 8, max_targets: int = 5
    ) -> None:
        self.picker = picker
        self.history = history
        self.ledger_size = ledger_size
        self.max_targets = max_targets

    def bundle(
        self, history: HistoryView, parent_id: str, env: DraftEnvironment, rng: np.random.Generator
    ) -> ContextBundle:
        parent_scores = history.train_scores(parent_id)
        elites = [e for e in history.elite_ids() if e != parent_id] if self.history else []
        if self.history and elites:
            solved_anywhere = (np.vstack([history.train_scores(e) for e in elites]) >= SOLVED).any(axis=0)
            solved_anywhere |= parent_scores >= SOLVED
        else:
            solved_anywhere = parent_scores >= SOLVED
        context = TargetingContext(
            ids=history.train_ids,
            parent_scores=parent_scores,
            solved_anywhere=solved_anywhere,
            failed_targets=history.failed_targets if self.history else {},
        )
        targets = tuple(self.picker.order(context, rng, self.max_targets))
        observation = None
        if targets:
            parent_code = history.view(parent_id).code
            row = env.observe(parent_code, targets[0])
            observation = {
                "instance_id": row.instance_id,
                "output": row.output,
                "expected": row.expected,
                "error": row.error,
                "score": row.score,
            }
        if not self.history:
            return ContextBundle(targets=targets, target_observation=observation, history=False)
        return ContextBundle(
            ledger=history.recent_notes(self.ledger_size),
            elites=tuple(history.view(e) for e in elites),
            targets=targets,
            target_observation=observation,
            donors=self._donors(history, elites, targets),
            tried=history.tried_from(parent_id),
            root=history.view(history.root_id(parent_id)),
            history=True,
        )

    @staticmethod
    def _donors(history: HistoryView, elites: list[str], targets: tuple[str, ...]) -> dict[str, ProgramView]:
        """For each target, the elite with the best training score on it, if that score counts as solved."""
        if not elites:
            return {}
        index = {instance: k for k, instance in enumerate(history.train_ids)}
        matrix = np.vstack([history.train_scores(e) for e in elites])
        donors: dict[str, ProgramView] = {}
        for target in targets:
            column = matrix[:, index[target]]
            best = int(np.argmax(column))  # first maximum: elites come in iteration order, so the earliest
            if column[best] >= SOLVED:
                donors[target] = history.view(elites[best])
        return donors
