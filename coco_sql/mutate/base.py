"""The mutator interface: given a parent, context and a live environment, propose one child.

A mutator never writes to the store and never sees validation or test rows: everything it may learn from the
data comes through its `DraftEnvironment` (training rows only) and the programs handed to it in the request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from coco_sql.reflect.environment import DraftEnvironment


@dataclass(frozen=True)
class ProgramView:
    """A program as a mutator sees it: code and its validation score (no validation rows)."""

    program_id: str
    code: str
    score: float


@dataclass(frozen=True)
class MutationRequest:
    iteration: int
    parent: ProgramView
    others: tuple[ProgramView, ...]  # other archive elites, candidate donors for recombination
    env: DraftEnvironment


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
