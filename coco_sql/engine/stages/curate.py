"""Stage `curate`: c_t, the context bundle the curator builds for a parent (Appendix C.3), and its summary.

The curator picks the target rows (InfoGain over each training input's k nearest inputs, or uniform) and the
history the mutator sees; it draws from the run's CURATOR_STREAM of iteration t, so a resumed run curates what
an uninterrupted one would have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coco_sql.engine.config import CURATOR_STREAM, RunConfig, iteration_rng
from coco_sql.engine.run_state import RunState
from coco_sql.reflect.context import ContextBundle
from coco_sql.reflect.curator import Curator
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.search.infogain import InfoGainTargets, TargetPicker, UniformTargets
from coco_sql.tasks import TaskPack


def make_curator(config: RunConfig, task: TaskPack) -> Curator:
    """InfoGain over each training input's k nearest inputs by text, or uniform targets (Appendix C.3)."""
    if config.targeting == "infogain":
        inputs = task.split("train").inputs
        texts = [" ".join(str(v) for v in row[1:]) for row in inputs.itertuples(index=False)]
        picker: TargetPicker = InfoGainTargets.from_texts(texts)  # O(rows * k) memory, no rows x rows matrix
    else:
        picker = UniformTargets()
    return Curator(picker, history=config.history)


@dataclass(frozen=True)
class Curate:
    """Stage `curate`: c_t for a parent, over the run's draft environment (training rows only)."""

    curator: Curator
    env: DraftEnvironment
    seed: int

    def __call__(self, t: int, state: RunState, parent_id: str) -> ContextBundle:
        return self.curator.bundle(state, parent_id, self.env, iteration_rng(self.seed, t, CURATOR_STREAM))


def bundle_summary(context: ContextBundle) -> dict[str, Any]:
    """What the curator put in c_t, as recorded in the 'curated' event (ids and sizes, no code)."""
    return {
        "history": context.history,
        "targets": list(context.targets),
        "donors": {target: view.program_id for target, view in context.donors.items()},
        "elites": len(context.elites),
        "ledger": len(context.ledger),
        "stagnant": context.stagnant(5),
    }
