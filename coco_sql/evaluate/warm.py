"""A task's deadline measured against a warm evaluation: the first run of a program fills the AI cache.

Why (issue 26): an analyst's 1,100-text task failed at its start with "the seed program fails on the validation
split: query exceeded its 10 s deadline" and again at 120 s, because the seed's first evaluation embedded every
text (about 0.37 s per text on that machine); it worked at 600 s. The deadline is there to stop candidates that
are slow, not to charge the seed for filling a cache every later evaluation reads. So the evaluations that may
meet a cold cache (the seed on train and val when a run starts, the seed and the champion on test when it
finishes, `coco_eval`) run warm:

1. run once under `WARM_UP_S` (the longest deadline a task may set), with the cache filling as it goes and the
   runtime's progress callback told how the embedding goes;
2. a run that ended within the task's deadline, or failed for another reason, is the outcome: a run under the
   deadline would have given the same;
3. otherwise run again under the task's deadline, now warm; that is the outcome, with the first run's usage (the
   calls and tokens that filled the cache are what the evaluation cost).

A program that is slow for itself (not for its AI calls) costs one long first run and then fails as before.
Candidates the search makes are evaluated cold under the deadline as ever: the seed warmed the cache with every
input text, so a child pays only for texts it adds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from coco_sql.options import MAX_TIMEOUT_S

WARM_UP_S = MAX_TIMEOUT_S
"""The deadline of a warm-up run, seconds: a cold cache of 10,000 texts at 0.37 s each fits."""


class _Outcome(Protocol):
    @property
    def ok(self) -> bool: ...

    latency_ms: float
    usage: Any


OutcomeT = TypeVar("OutcomeT", bound=_Outcome)


def run_warm(attempt: Callable[[float], OutcomeT], deadline_s: float) -> OutcomeT:
    """The outcome of a program under `deadline_s` once its AI calls are cached; `attempt(seconds)` runs and
    scores it under a deadline of that many seconds (module docstring)."""
    first = attempt(max(WARM_UP_S, deadline_s))
    if not first.ok or first.latency_ms <= deadline_s * 1000.0:
        return first
    return replace(attempt(deadline_s), usage=first.usage)  # type: ignore[type-var]
