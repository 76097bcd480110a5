"""What a mutator hands the loop for one iteration: a child's code and how it came about, or why there is none."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

# A `notes` key: the approaches the mutator scored on this parent and did not propose (a list of str). The loop
# counts them as tried from this parent (`RunState.tried_from`), as a resume does from the 'mutation' event, so a
# parent drawn again is never offered the same hypotheses.
TESTED_NOTE = "tested_approaches"

if TYPE_CHECKING:
    from coco_sql.llm.usage import Usage
    from coco_sql.store.records import AgentTurn


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
    # (`engine.stages.select`), or ends the run when no parent is left.
    exhausted: str | None = None
    # The mutator's own model spending for this proposal: one line per (agent role, model), e.g. ('agent',
    # 'openai/gpt-4o-mini'). The loop stores it in ai_usage / ai_calls with split 'mutator'.
    usage: Usage | None = None
    transcript: tuple[AgentTurn, ...] = ()  # the conversation that produced it (table agent_turns)
    paradigm: str | None = None  # the strategy the reflector put in force for it (ledger.paradigm)
