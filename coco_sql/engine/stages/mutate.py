"""Stage `mutate`: p_t ~ MetaReflect(p'_t, c_t; E_t), the mutator's proposal for a parent, on the iteration's
minibatch T_t when the run samples rows (`engine.minibatch`), and what the mutator's drafts spent.

The mutator sees training rows only: its environment is the run's draft environment, or one over the sampled
training rows. It draws from the run's MUTATOR_STREAM of t (the sample from MINIBATCH_STREAM), so a resumed run
proposes what an uninterrupted one would have.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from coco_sql.engine.config import MINIBATCH_STREAM, MUTATOR_STREAM, RunConfig, iteration_rng
from coco_sql.engine.minibatch import Minibatch
from coco_sql.engine.registry import build_mutator
from coco_sql.engine.run_state import RunState
from coco_sql.engine.stages.curate import Curate
from coco_sql.engine.stages.select import Attempt
from coco_sql.languages import Language
from coco_sql.llm.runtime import AiRuntime
from coco_sql.llm.usage import Usage
from coco_sql.mutate import MutationRequest, Mutator, Proposal
from coco_sql.mutate.pace import PrimitiveAwareMutator
from coco_sql.primitives.discovery import PrimitiveState
from coco_sql.reflect.context import ContextBundle
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.reflect.history import HistoryTools


def make_mutator(config: RunConfig, language: Language, entry: str | None = None) -> Mutator:
    """The run's mutator; with primitives on, wrapped in PACE's operators (`mutate.pace`)."""
    mutator = build_mutator(config.mutator, language, config.mutator_settings)
    if config.primitives:
        return PrimitiveAwareMutator(mutator, language=language.name, entry=entry)
    return mutator


@dataclass(frozen=True)
class Mutate:
    """Stage `mutate`: ask `mutator` for a child of a parent, given c_t, the run's history tools and chat
    runtime (`models`, for a mutator that calls models) and PACE's library (`pace`, primitives on)."""

    mutator: Mutator
    env: DraftEnvironment
    seed: int
    minibatch: int  # rows per split of T_t; 0: every row
    history: HistoryTools | None
    models: AiRuntime | None
    pace: PrimitiveState | None

    def __call__(
        self, t: int, state: RunState, parent_id: str, context: ContextBundle
    ) -> tuple[Minibatch | None, Proposal]:
        """The minibatch T_t (None: every row) and the proposal; the sample's environment is closed after."""
        sample = None
        if self.minibatch:  # T_t: the mutator works on these training rows only
            rng = iteration_rng(self.seed, t, MINIBATCH_STREAM)
            sample = Minibatch.draw(self.minibatch, state.train_ids, state.val_ids, context.targets, rng)
        env = self.env
        env_t = env.on_rows(sample.train) if sample is not None else env
        primitives = self.pace.context() if self.pace is not None else None
        request = MutationRequest(
            t, state.view(parent_id), env_t, context, history=self.history, models=self.models,
            primitives=primitives,
        )  # fmt: skip
        try:
            return sample, self.mutator.propose(request, iteration_rng(self.seed, t, MUTATOR_STREAM))
        finally:
            if env_t is not env:
                env_t.close()


@dataclass
class Attempts:
    """Iteration t's attempt for a parent (`Attempt`, what `Select` calls): curate c_t, then mutate. Each
    attempt draws from fresh streams of the iteration's RNG; the time of its phases adds up in `phases`."""

    iteration: int
    state: RunState
    curate: Curate
    mutate: Mutate
    phases: dict[str, float] = field(default_factory=lambda: {"curate": 0.0, "mutate": 0.0})

    def __call__(self, parent_id: str) -> Attempt:
        clock = time.perf_counter()
        context = self.curate(self.iteration, self.state, parent_id)
        self.phases["curate"] += (time.perf_counter() - clock) * 1000.0
        clock = time.perf_counter()
        sample, proposal = self.mutate(self.iteration, self.state, parent_id, context)
        self.phases["mutate"] += (time.perf_counter() - clock) * 1000.0
        return context, sample, proposal


def drafts_usage(ai: AiRuntime | None, proposal: Proposal) -> Usage | None:
    """What the evaluator's runtime spent since the last batch (the mutator's draft tests and probes), taken
    before the child is judged, less the mutator's own chat calls when they went through that runtime (those
    are stored once, with split 'mutator'). None without a runtime."""
    if ai is None:
        return None
    return _without(ai.take_spent(), proposal.usage)


def _without(spent: Usage, mutator: Usage | None) -> Usage:
    """`spent` without the lines and calls of the mutator's own models."""
    if not mutator:
        return spent
    rest = Usage()
    rest.lines = {key: line for key, line in spent.lines.items() if key not in mutator.lines}
    rest.provider_calls = [c for c in spent.provider_calls if (c.function, c.model) not in mutator.lines]
    rest.errors = list(spent.errors)
    return rest
