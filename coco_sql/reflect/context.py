"""The context bundle c_t that the curator hands the mutator each iteration (CoCoEvolve Section 2.2, C.1).

Plain data. Everything here comes from the TRAINING rows and from program-level validation aggregates: the
bundle never carries a validation or test row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProgramView:
    """A program as a mutator sees it: code and its validation score (an aggregate, no validation rows)."""

    program_id: str
    code: str
    score: float


@dataclass(frozen=True)
class StrategyNote:
    """One ledger line: what an iteration tried and what it gained."""

    iteration: int
    strategy: str
    kind: str  # hillclimb | direction
    status: str  # improved | neutral | regressed | failed
    score_delta: float | None
    note: str | None = None
    paradigm: str | None = None  # the strategy's text, when the reflector put one in force


@dataclass(frozen=True)
class ContextBundle:
    """c_t = Curate(H_{t-1}): ledger, active paradigm, island elites, target rows, the first target's
    observation on the parent, and donors that already solve a target (Appendix C.1).

    A parent-local bundle (history switched off) carries only targets and the target observation, both drawn
    from the parent's own training feedback.
    """

    ledger: tuple[StrategyNote, ...] = ()
    paradigm: str | None = None
    elites: tuple[ProgramView, ...] = ()
    targets: tuple[str, ...] = ()
    target_observation: Mapping[str, Any] | None = None
    donors: Mapping[str, ProgramView] = field(default_factory=dict)
    tried: frozenset[str] = frozenset()  # approaches of this parent's earlier children: not worth repeating
    root: ProgramView | None = None  # the lineage's first program: the structure the user wrote
    history: bool = True

    def stagnant(self, window: int) -> bool:
        """True when the last `window` ledger lines gained nothing (the ledger's stagnation signal)."""
        recent = self.ledger[-window:]
        return len(recent) == window and not any(note.status == "improved" for note in recent)
