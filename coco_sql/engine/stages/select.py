"""Stage `select`: p'_t ~ pi(A_{t-1}), an iteration's parent, drawn from its island's population so that the
mutator still has something to try for it.

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

The stage draws; what it draws for (`Attempt`: curate c_t, then mutate) is the next two stages, handed in as a
callable, since a parent the mutator has nothing left for is only known once the mutator has been asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from coco_sql.engine.config import POLICY_STREAM, RunConfig, iteration_rng
from coco_sql.engine.minibatch import Minibatch
from coco_sql.engine.run_state import RunState
from coco_sql.llm.usage import Usage
from coco_sql.mutate import Proposal
from coco_sql.reflect.context import ContextBundle
from coco_sql.search import POLICIES, ParentPolicy, Population
from coco_sql.store import Event
from coco_sql.store.records import EXHAUSTED_EVENT


def make_policy(config: RunConfig) -> ParentPolicy:
    """The run's parent policy pi, by its name in the run's config."""
    return POLICIES[config.policy]()


@dataclass(frozen=True)
class Selection:
    """What `Select` drew at iteration t: the island, its population, the parent and the proposal for it
    (`found`), and the time the draw took apart from the attempts (ms)."""

    island: int
    population: Population
    found: Found
    ms: float


@dataclass(frozen=True)
class Select:
    """Stage `select`: iteration t's island (round robin), its population, and a parent drawn by `policy` from
    the run's POLICY_STREAM of t (a redraw takes the stream's next number) that `attempt` has a child for."""

    policy: ParentPolicy
    seed: int
    islands: int

    def __call__(self, t: int, state: RunState, attempt: Callable[[str], Attempt]) -> Selection:
        clock = time.perf_counter()
        island = (t - 1) % self.islands
        population = Population.from_archive(state.archive, island, state.val_rows)
        draws = iteration_rng(self.seed, t, POLICY_STREAM)
        ms = (time.perf_counter() - clock) * 1000.0
        found = propose_from_a_parent(attempt, self.policy, population, draws, state.exhausted)
        return Selection(island, population, found, ms)


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
