"""What a run's start leaves when its seed fails: a message that names the option to change, and the AI cache.

Why (issue 26): a start that failed said "the seed program fails on the validation split: query exceeded its 10 s
deadline", without naming `timeout_seconds`, and threw away the embeddings it had computed, so every retry of a
1,100-text task embedded every text again. Now the message names the option, and the cache entries the start
made are written to the store's shared cache tables (content-addressed, shared by every run: no run row, no
event, nothing a run reads as its own).
"""

from __future__ import annotations

import contextlib

from coco_sql.engine.cross_fit import with_honest_train
from coco_sql.errors import CandidateRejected, TaskError
from coco_sql.evaluate import SEARCH_SPLITS, Evaluator, Outcome
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.store import Warehouse
from coco_sql.store.shared_cache import save_cache
from coco_sql.tasks import TaskPack


def score_seed(task: TaskPack, evaluator: Evaluator) -> dict[str, Outcome]:
    """The seed's outcomes on the search splits, its training rows scored honestly (`cross_fit`); a one-line
    TaskError when it is rejected or fails on validation. Evaluated warm: the task's deadline holds once the
    seed's AI calls are cached (`evaluate.warm`)."""
    code = task.seed_program
    try:
        evaluator.check(code)
    except CandidateRejected as rejection:
        raise TaskError(f"{task.root / 'task.toml'}: the seed program is rejected: {rejection}") from None
    outcomes = {split: evaluator.evaluate(code, split, warm=True) for split in SEARCH_SPLITS}
    outcomes, _ = with_honest_train(DraftEnvironment(evaluator), evaluator.ai, code, outcomes)
    if not outcomes["val"].ok:
        raise TaskError(seed_failure(task, outcomes["val"].error or ""))
    return outcomes


def seed_failure(task: TaskPack, error: str) -> str:
    """The one-line message of a seed that fails on the validation split, with what to change."""
    message = f"{task.name}: the seed program fails on the validation split: {error}"
    if "deadline" not in error:
        return message
    where = (
        "register the task again with a larger one: CALL coco_task(..., {..., 'timeout_seconds': 60})"
        if _registered(task)
        else f"raise [program] timeout_seconds in {task.root / 'task.toml'}"
    )
    return (
        f"{message} (its AI calls were cached first, so this is the program's own time: option "
        f"'timeout_seconds' is {task.timeout_seconds:g} s; {where})"
    )


def _registered(task: TaskPack) -> bool:
    """A task registered from warehouse rows lives in a temporary folder named coco-task-*."""
    return task.root.parent.name.startswith("coco-task-")


def keep_ai_cache(store: Warehouse, evaluator: Evaluator) -> None:
    """Write the cache entries the evaluator's runtime made since its last batch (best effort: the error that
    stopped the start is the one raised)."""
    if evaluator.ai is not None:
        with contextlib.suppress(Exception):
            save_cache(store, evaluator.ai.cache)
