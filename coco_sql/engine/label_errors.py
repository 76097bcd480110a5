"""A run's likely label errors, flagged at its end (issue 38): `search.label_noise`'s rule over the task's
training rows, their embeddings by the run's embedding model, and every program's training scores.

Only a task whose labels are categories (a VARCHAR or VARCHAR[] contract) and whose inputs include text has
them; its rows' text is its VARCHAR input columns joined by a space. Without an AI runtime nothing is flagged.
The rows go to the table `label_errors` with the run's last batch (`stages.finish`).
"""

from __future__ import annotations

import numpy as np

from coco_sql.engine.run_state import RunState
from coco_sql.errors import CocoError
from coco_sql.llm.runtime import AiRuntime
from coco_sql.llm.usage import Usage
from coco_sql.search.label_noise import likely_errors
from coco_sql.store.records import LabelError, to_json
from coco_sql.tasks import TaskPack

SOLVED = 1.0


def label_errors(task: TaskPack, state: RunState, ai: AiRuntime | None) -> tuple[LabelError, ...]:
    """The run's flagged training rows (module docstring), in split order."""
    columns = [c for c, kind in task.input_columns.items() if kind.strip().upper() in ("VARCHAR", "TEXT")]
    if ai is None or not columns or task.contract.type.strip().upper() not in ("VARCHAR", "VARCHAR[]"):
        return ()
    full = [pid for pid, scores in state.train_rows.items() if pid not in state.sampled and len(scores)]
    if not full:
        return ()
    train = task.split("train")
    ids = [str(i) for i in train.inputs["id"]]
    texts = [" ".join(str(train.inputs[c].iloc[k]) for c in columns) for k in range(len(train.inputs))]
    golds = [_labels(train.expected.get(i)) for i in ids]
    position = {instance: k for k, instance in enumerate(state.train_ids)}
    best = np.max(np.stack([state.train_rows[pid] for pid in full]), axis=0)
    unsolved = [i in position and best[position[i]] < SOLVED for i in ids]
    try:
        vectors = np.asarray(ai.embed("AI_EMBED", texts, usage=Usage()), dtype=np.float64)
    except CocoError:  # no embeddings, no flags: the run's end does not fail for them
        return ()
    return tuple(
        LabelError(
            ids[s.index],
            texts[s.index],
            to_json(train.expected.get(ids[s.index])),
            s.neighbours_label,
            s.share,
            len(full),
        )
        for s in likely_errors(golds, vectors, unsolved)
    )


def _labels(value: object) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return () if value is None else (str(value),)


__all__ = ["label_errors"]
