"""Honest training scores (issue 15, part 4): the training outcome of a program as its kind's cross-fit makes it
(`languages.base.CrossFit`: SQL predicts the rows a program holds as few-shot examples out of fold), or as it
stands for a kind without one."""

from __future__ import annotations

from coco_sql.evaluate import Outcome
from coco_sql.llm.runtime import AiRuntime
from coco_sql.llm.usage import Usage
from coco_sql.plugins import kind
from coco_sql.reflect.environment import DraftEnvironment

TRAIN = "train"


def with_honest_train(
    env: DraftEnvironment, ai: AiRuntime | None, code: str, outcomes: dict[str, Outcome]
) -> tuple[dict[str, Outcome], Usage | None]:
    """`outcomes` (whole splits) with the training outcome cross-fitted, and what the variants' AI calls spent
    (None without a runtime). The evaluations' own usage travels with their outcomes, so it is dropped here."""
    cross_fit = kind(env.task.language).cross_fit
    if ai is not None:
        ai.take_spent()
    train = outcomes[TRAIN]
    honest = {**outcomes, TRAIN: cross_fit(env, code, train) if cross_fit is not None else train}
    return honest, ai.take_spent() if ai is not None else None


__all__ = ["with_honest_train"]
