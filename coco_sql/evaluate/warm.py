"""A task's deadline measured against a warm evaluation: the first run of a program fills the AI cache.

Why (issue 26): an analyst's 1,100-text task failed at its start with "the seed program fails on the validation
split: query exceeded its 10 s deadline" and again at 120 s, because the seed's first evaluation embedded every
text (about 0.37 s per text on that machine); it worked at 600 s. The deadline is there to stop candidates that
are slow, not to charge the seed for filling a cache every later evaluation reads. So the evaluations that may
meet a cold cache (the seed on train and val when a run starts, the seed and the champion on test when it
finishes, `coco_eval`) run warm:

1. run under the task's deadline; a run that ends within it, or fails for another reason, or passes it without
   calling a model (every AI answer was cached: the program is slow for itself), is the outcome;
2. a run that passed the deadline while it called a model (a cold cache) is run again under `WARM_UP_S` (the
   longest deadline a task may set), the cache filling as it goes and the runtime's progress callback told how
   the embedding goes (each chunk the first run finished is cached already): that run is the outcome.

Until issue 38 a warm-up that ended past the task's deadline in wall time ran a third time under it: whether a
program passed then depended on the machine's load. Now the query's deadline is counted in CPU time by the
sandbox (`sandbox.lockdown`), the same at any load, so a program slow for itself fails in the warm-up run as it
would in any other, and how long the warm-up took decides nothing.

The outcome's usage is the runs' together: the provider calls and tokens that filled the cache are what the
evaluation cost (the later runs' cache hits are counted too). A warm cache costs one run, as before; a program
slow for itself fails at the deadline, as before; only a program that both calls models on a cold cache and is
slow for itself runs up to `WARM_UP_S` before it fails. Candidates the search makes are evaluated under the
deadline as ever (the seed warmed the cache with the texts of every row, so a child pays only for texts it adds).
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


def run_warm(attempt: Callable[[float], tuple[OutcomeT, bool]], deadline_s: float) -> OutcomeT:
    """The outcome of a program under `deadline_s` once its AI calls are cached (module docstring).
    `attempt(seconds)` runs and scores it under a deadline of that many seconds, and says whether it passed that
    deadline while it called a model."""
    outcome, cold = attempt(deadline_s)
    if not cold:
        return outcome
    warm, _ = attempt(max(WARM_UP_S, deadline_s))
    return replace(warm, usage=_together(outcome.usage, warm.usage))  # type: ignore[type-var]


def _together(first: Any, second: Any) -> Any:
    """Two runs' usage as one (a new Usage: neither run's is changed)."""
    if first is None or second is None:
        return first if second is None else second
    both = type(first)()
    both.merge(first)
    both.merge(second)
    return both
