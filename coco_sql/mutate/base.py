"""The mutator interface: given a parent, context and a live environment, propose one child.

A mutator never writes to the store and never sees validation or test rows: everything it may learn from the
data comes through its `DraftEnvironment` (training rows only) and the programs handed to it in the request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from coco_sql.reflect.context import ContextBundle, ProgramView
from coco_sql.reflect.environment import DraftEnvironment


@dataclass(frozen=True)
class MutationRequest:
    iteration: int
    parent: ProgramView
    env: DraftEnvironment  # E_t: live tools over the training rows
    context: ContextBundle = field(default_factory=ContextBundle)  # c_t: curated history

    @property
    def others(self) -> tuple[ProgramView, ...]:
        """Elites other than the parent: candidate partners for recombination."""
        return tuple(e for e in self.context.elites if e.program_id != self.parent.program_id)


@dataclass(frozen=True)
class Proposal:
    code: str
    approach: str  # what the mutator did, in one sentence (stored on the program and in the ledger)
    strategy: str = "hillclimb"
    donor_id: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)  # recorded in the 'mutation' event


class Mutator(Protocol):
    name: str

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal: ...
