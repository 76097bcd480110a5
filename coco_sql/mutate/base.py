"""The mutator interface: given a parent, context and a live environment, propose one child.

A mutator never writes to the store and never sees validation or test rows: everything it may learn from the
data comes through its `DraftEnvironment` (training rows only) and the programs handed to it in the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from coco_sql.core.proposal import Proposal
from coco_sql.reflect.context import ContextBundle, ProgramView

if TYPE_CHECKING:
    from coco_sql.llm.runtime import AiRuntime
    from coco_sql.primitives.context import PrimitiveContext
    from coco_sql.reflect.environment import DraftEnvironment
    from coco_sql.reflect.history import HistoryTools

__all__ = [
    "CallsModels",
    "DeclaresModels",
    "MutationRequest",
    "Mutator",
    "OperatorBrief",
    "Proposal",
    "calls_models",
    "declared_models",
]


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


class Mutator(Protocol):
    name: str

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal: ...


@runtime_checkable
class CallsModels(Protocol):
    """Optional part of a `Mutator`: it calls chat models when `uses_models` is true. The loop then hands it the
    run's chat runtime (`MutationRequest.models`), whose response cache is the store's, so that a resumed run
    replays the turns it has already had answered. A mutator without the attribute gets no runtime."""

    uses_models: bool


@runtime_checkable
class DeclaresModels(Protocol):
    """Optional part of a `Mutator` given to the loop ready-made (not built from the run's settings): the chat
    models it will call. A run's spend limit needs a price for each before anything is written."""

    models: tuple[str, ...]


def calls_models(mutator: Mutator) -> bool:
    """Whether `mutator` asks for the run's chat runtime (`CallsModels`)."""
    return isinstance(mutator, CallsModels) and bool(mutator.uses_models)


def declared_models(mutator: Mutator | None) -> tuple[str, ...]:
    """The chat models a ready-made `mutator` declares (`DeclaresModels`); none for any other."""
    return tuple(mutator.models) if isinstance(mutator, DeclaresModels) else ()
