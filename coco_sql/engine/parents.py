"""An iteration's parent and the mutator's proposal for it: drawing a parent the mutator still has something to
try for.

A mutator that has nothing left to try for a parent says so (`Proposal.exhausted`) instead of handing the parent
back unchanged; the loop records it (event `parent_exhausted`, which a resume reads back into
`RunState.exhausted`) and never draws that parent again. Resubmitting the parent spent an evaluation, a ledger
line and an archive attempt on a program the run already had (issue 26).

    first draw    p ~ pi(A)                                      the policy's own draw, unchanged
    redraw        p ~ pi'(A),  pi'(e) ∝ pi(e) * [e not exhausted]
                  (uniform over the open elites when pi puts no mass on any of them)
    none left     every elite of every island exhausted: the run stops, saying so

The first draw is exactly the policy's `select`, so a run where nothing is ever exhausted draws what it drew
before; each redraw takes the next number from the same per-iteration RNG stream, so the same seed gives the
same run, and a resumed run (its exhausted set rebuilt from the events) the same parents.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from coco_sql.engine.config import CURATOR_STREAM, MINIBATCH_STREAM, MUTATOR_STREAM, iteration_rng
from coco_sql.engine.minibatch import Minibatch
from coco_sql.engine.run_state import RunState
from coco_sql.llm.runtime import AiRuntime
from coco_sql.llm.usage import Usage
from coco_sql.mutate import MutationRequest, Mutator, Proposal
from coco_sql.primitives.discovery import PrimitiveState
from coco_sql.reflect.context import ContextBundle
from coco_sql.reflect.curator import Curator
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.reflect.history import HistoryTools
from coco_sql.search import ParentPolicy, Population
from coco_sql.store import Event
from coco_sql.store.records import EXHAUSTED_EVENT


def draw_parent(
    policy: ParentPolicy, population: Population, rng: np.random.Generator, exhausted: set[str]
) -> str | None:
    """The policy's parent, or another (`redraw`) when the policy names an exhausted one; None when every
    elite is exhausted."""
    parent = policy.select(population, rng)
    return parent if parent not in exhausted else redraw(policy, population, rng, exhausted)


def redraw(
    policy: ParentPolicy, population: Population, rng: np.random.Generator, exhausted: set[str]
) -> str | None:
    """A parent drawn from the policy's distribution with the exhausted elites taken out (module docstring);
    None when no elite is left."""
    ids = population.program_ids
    open_ = np.array([pid not in exhausted for pid in ids], dtype=float)
    if not open_.any():
        return None
    weights = np.asarray(policy.probabilities(population), dtype=float) * open_
    if not weights.sum() > 0:  # the policy puts all its mass on exhausted elites (say, the island's best)
        weights = open_
    return ids[int(rng.choice(len(ids), p=weights / weights.sum()))]


def nothing_left(population: Population, exhausted: set[str]) -> str:
    """The reason a run stops when no elite is left, in one line."""
    n = population.n_programs
    return (
        f"nothing left to try: the mutator has no untried edit for any of the {n} program"
        f"{'' if n == 1 else 's'} in the archive ({len(exhausted)} exhausted parent"
        f"{'' if len(exhausted) == 1 else 's'} in all)"
    )


Attempt = tuple[ContextBundle, Minibatch | None, Proposal]
"""What one attempt at an iteration gives for a parent: the curated context, the minibatch and the proposal."""


@dataclass
class Proposer:
    """Iteration t's attempt for a parent (`Attempt`): curate c_t, draw the minibatch T_t, ask the mutator.
    Each attempt draws from fresh streams of the iteration's RNG; the time of its phases adds up in `phases`."""

    seed: int
    iteration: int
    state: RunState
    curator: Curator
    mutator: Mutator
    env: DraftEnvironment
    minibatch: int
    history: HistoryTools | None
    models: AiRuntime | None
    pace: PrimitiveState | None
    phases: dict[str, float] = field(default_factory=lambda: {"curate": 0.0, "mutate": 0.0})

    def __call__(self, parent_id: str) -> Attempt:
        t, state, env = self.iteration, self.state, self.env
        clock = time.perf_counter()
        context = self.curator.bundle(state, parent_id, env, iteration_rng(self.seed, t, CURATOR_STREAM))
        self.phases["curate"] += (time.perf_counter() - clock) * 1000.0

        clock = time.perf_counter()
        sample = None
        if self.minibatch:  # T_t: the mutator works on these training rows only
            rng = iteration_rng(self.seed, t, MINIBATCH_STREAM)
            sample = Minibatch.draw(self.minibatch, state.train_ids, state.val_ids, context.targets, rng)
        env_t = env.on_rows(sample.train) if sample is not None else env
        primitives = self.pace.context() if self.pace is not None else None
        request = MutationRequest(
            t, state.view(parent_id), env_t, context, history=self.history, models=self.models,
            primitives=primitives,
        )  # fmt: skip
        try:
            proposal = self.mutator.propose(request, iteration_rng(self.seed, t, MUTATOR_STREAM))
        finally:
            if env_t is not env:
                env_t.close()
        self.phases["mutate"] += (time.perf_counter() - clock) * 1000.0
        return context, sample, proposal


@dataclass(frozen=True)
class Found:
    """An iteration's parent and the mutator's proposal for it (`parent_id` None: no parent left), and the
    parents it had nothing left for first, with what it said of each (`skipped`)."""

    parent_id: str | None
    context: ContextBundle | None = None
    sample: Minibatch | None = None
    proposal: Proposal | None = None
    skipped: tuple[tuple[str, Proposal], ...] = ()

    @property
    def skipped_ids(self) -> tuple[str, ...]:
        return tuple(pid for pid, _ in self.skipped)

    def events(self, iteration: int, mutator: str) -> list[Event]:
        """A `parent_exhausted` event for each skipped parent, with the mutator's reason and notes."""
        return [
            Event(iteration, EXHAUSTED_EVENT, pid, {"reason": p.exhausted, "mutator": mutator, **p.notes})
            for pid, p in self.skipped
        ]


def propose_from_a_parent(
    attempt: Callable[[str], Attempt],
    policy: ParentPolicy,
    population: Population,
    rng: np.random.Generator,
    exhausted: set[str],
) -> Found:
    """Draw a parent (`draw_parent`) and ask for its child (`attempt`); while the mutator has nothing left for
    the parent, add it to `exhausted` and try another (`redraw`). The proposal carries the model spending and
    turns of the attempts before it, so that the iteration records them."""
    skipped: list[tuple[str, Proposal]] = []
    parent_id = draw_parent(policy, population, rng, exhausted)
    while parent_id is not None:
        context, sample, proposal = attempt(parent_id)
        if proposal.exhausted is None:
            proposal = _with_spending_of(proposal, [p for _, p in skipped])
            return Found(parent_id, context, sample, proposal, tuple(skipped))
        skipped.append((parent_id, proposal))
        exhausted.add(parent_id)
        parent_id = redraw(policy, population, rng, exhausted)
    return Found(None, skipped=tuple(skipped))


def _with_spending_of(proposal: Proposal, earlier: list[Proposal]) -> Proposal:
    """`proposal` with the model usage and turns of `earlier` proposals added."""
    spent = [p for p in earlier if p.usage or p.transcript]
    if not spent:
        return proposal
    usage = Usage()
    for p in [*spent, proposal]:
        if p.usage:
            usage.merge(p.usage)
    turns = tuple(turn for p in [*spent, proposal] for turn in p.transcript)
    return replace(proposal, usage=usage, transcript=turns)
