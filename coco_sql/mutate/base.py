"""The mutator interface: given a parent, context and a live environment, propose one child.

A mutator never writes to the store and never sees validation or test rows: everything it may learn from the
data comes through its `DraftEnvironment` (training rows only) and the programs handed to it in the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from coco_sql.reflect.context import ContextBundle, ProgramView
from coco_sql.reflect.environment import DraftEnvironment

if TYPE_CHECKING:
    from coco_sql.llm.runtime import AiRuntime
    from coco_sql.llm.usage import Usage
    from coco_sql.primitives.context import PrimitiveContext
    from coco_sql.reflect.history import HistoryTools
    from coco_sql.store.records import AgentTurn


@dataclass(frozen=True)
class MutationRequest:
    iteration: int
    parent: ProgramView
    env: DraftEnvironment  # E_t: live tools over the training rows
    context: ContextBundle = field(default_factory=ContextBundle)  # c_t: curated history
    history: HistoryTools | None = None  # the history tools over this run (Table 6), for mutators that query
    models: AiRuntime | None = None  # the run's chat-model runtime, for mutators that call models
    # PACE: the run's library and posteriors (None: primitives off), and the operator a mutator that writes
    # code with a model must apply (None: it is not driven by one)
    primitives: PrimitiveContext | None = None
    operator: OperatorBrief | None = None

    @property
    def others(self) -> tuple[ProgramView, ...]:
        """Elites other than the parent: candidate partners for recombination."""
        return tuple(e for e in self.context.elites if e.program_id != self.parent.program_id)


@dataclass(frozen=True)
class OperatorBrief:
    """A primitive operator (PACE P1-P4) for a mutator that writes code itself: the instruction, with the
    primitives' definitions, and the contract checker (None when the candidate keeps it, else the violation)."""

    text: str
    check: Callable[[str], str | None]


@dataclass(frozen=True)
class Proposal:
    code: str
    approach: str  # what the mutator did, in one sentence (stored on the program and in the ledger)
    strategy: str = "hillclimb"
    donor_id: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)  # recorded in the 'mutation' event
    discarded: str | None = None  # why the mutator produced no child: recorded as an invalid child, not run
    # The mutator has nothing left to try for this parent (every edit it can make was tried): why. No child is
    # made and `code` is ignored; the loop never draws this parent again and spends the iteration on another
    # (`engine.parents`), or ends the run when no parent is left.
    exhausted: str | None = None
    # The mutator's own model spending for this proposal: one line per (agent role, model), e.g. ('agent',
    # 'openai/gpt-4o-mini'). The loop stores it in ai_usage / ai_calls with split 'mutator'.
    usage: Usage | None = None
    transcript: tuple[AgentTurn, ...] = ()  # the conversation that produced it (table agent_turns)
    paradigm: str | None = None  # the strategy the reflector put in force for it (ledger.paradigm)


class Mutator(Protocol):
    name: str

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal: ...
