"""The reflector and the proposer (CoCoEvolve Section 3.4 and Appendix E): who decides what the mutator pursues.

Before the coding agent starts, the **reflector** reads the strategy ledger and decides ONE thing for the
iteration: `keep` an active strategy (feed this mutation into it), ask for a `new` one, or `none` (plain
hillclimbing with no named strategy). It neither designs strategies nor edits code. On `new`, the **proposer**
returns JSON ideas, high-level strategies that are fundamentally different from what the ledger shows was tried;
the first idea whose name is not already in the ledger becomes the iteration's paradigm. Each has its own model
setting, and each call is one cached, budgeted turn recorded in `agent_turns` under its role.

Neither can stop a mutation: an unreadable answer, a `keep` of a strategy the ledger does not hold, or a
proposer that only repeats tried strategies falls back to `none`, and the reason is kept with the decision. A
dead endpoint still stops the run (`ProviderUnavailable`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coco_sql.agent.conversation import Budget, Conversation, Discard
from coco_sql.agent.prompts import render
from coco_sql.llm.providers.anthropic import first_json_object
from coco_sql.llm.providers.base import Message
from coco_sql.llm.runtime import AiRuntime
from coco_sql.reflect.context import StrategyNote

DECISIONS = ("keep", "new", "none")

REFLECTOR_SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": list(DECISIONS)},
        "strategy": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["decision", "reason"],
}
PROPOSER_SCHEMA = {
    "type": "object",
    "properties": {
        "ideas": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "description": {"type": "string"}},
                "required": ["name", "description"],
            },
        }
    },
    "required": ["ideas"],
}
_ONE_CALL = Budget(max_turns=1, max_tokens=1_000_000, wall_s=120.0)


@dataclass(frozen=True)
class StrategyStats:
    """One named strategy of the ledger, as the reflector sees it."""

    name: str
    attempts: int
    improved: int
    best_delta: float | None
    last_iteration: int
    description: str | None = None  # what the proposer said the strategy is


@dataclass(frozen=True)
class Direction:
    """The reflector's decision for one mutation. `strategy` and `description` are set for keep and new."""

    decision: str  # keep | new | none
    reason: str
    strategy: str | None = None
    description: str | None = None

    @property
    def paradigm(self) -> str | None:
        """The text the mutator's prompt shows as the active paradigm."""
        if self.strategy is None:
            return None
        return f"{self.strategy}: {self.description}" if self.description else self.strategy


def strategy_pool(ledger: Sequence[StrategyNote]) -> list[StrategyStats]:
    """The named (non-hillclimb) strategies of `ledger`, most recently tried first."""
    grouped: dict[str, list[StrategyNote]] = {}
    for note in ledger:
        if note.kind != "hillclimb" and note.strategy != "hillclimb":
            grouped.setdefault(note.strategy, []).append(note)
    pool = []
    for name, notes in grouped.items():
        deltas = [n.score_delta for n in notes if n.score_delta is not None]
        described = [n.paradigm.split(": ", 1)[1] for n in notes if n.paradigm and ": " in n.paradigm]
        pool.append(
            StrategyStats(
                name,
                len(notes),
                sum(n.status == "improved" for n in notes),
                max(deltas) if deltas else None,
                max(n.iteration for n in notes),
                described[-1] if described else None,
            )
        )
    return sorted(pool, key=lambda s: -s.last_iteration)


def since_improvement(ledger: Sequence[StrategyNote]) -> int:
    """How many of the latest ledger lines came after the last improvement (all of them when none improved)."""
    for back, note in enumerate(reversed(ledger)):
        if note.status == "improved":
            return back
    return len(ledger)


class Reflector:
    """Decides keep, new or none for one mutation from the ledger (module docstring)."""

    agent = "reflector"

    def __init__(self, model: str, proposer: Proposer, *, max_output_tokens: int = 512) -> None:
        self.model = model
        self.proposer = proposer
        self.max_output_tokens = max_output_tokens

    def decide(
        self, runtime: AiRuntime, ledger: Sequence[StrategyNote], iteration: int, parent_score: float
    ) -> tuple[Direction, list[Conversation]]:
        """The iteration's direction, and the conversations that produced it (for the transcript and usage)."""
        pool = strategy_pool(ledger)
        chat = Conversation(self.agent, self.model, _ONE_CALL, max_output_tokens=self.max_output_tokens)
        system = render("reflector_system")
        user = render(
            "reflector_user",
            iteration=iteration,
            parent_score=parent_score,
            ledger=list(ledger),
            pool=pool,
            since_improvement=since_improvement(ledger),
        )
        chat.add(Message("system", system.text), template=system.ref)
        chat.add(Message("user", user.text), template=user.ref)
        chats = [chat]
        try:
            answer = _json_object(chat.ask(runtime, response_schema=REFLECTOR_SCHEMA).text)
        except (Discard, ValueError) as error:
            return Direction("none", f"the reflector's answer was not usable ({error})"), chats
        decision = str(answer.get("decision", "")).strip().lower()
        reason = " ".join(str(answer.get("reason", "")).split())[:300]
        if decision == "new":
            direction, proposer_chat = self.proposer.propose(runtime, ledger, pool, reason)
            return direction, [*chats, proposer_chat]
        if decision == "keep":
            named = str(answer.get("strategy") or "").strip()
            match = next((s for s in pool if s.name.lower() == named.lower()), None)
            if match is None:
                reason = f"the reflector kept {named!r}, which the ledger does not hold"
                return Direction("none", reason), chats
            return Direction("keep", reason, match.name, match.description), chats
        if decision != "none":
            reason = f"the reflector's decision {decision!r} is not one of keep, new, none"
        return Direction("none", reason), chats


class Proposer:
    """Names one new strategy that the ledger does not show (module docstring)."""

    agent = "proposer"

    def __init__(self, model: str, *, max_output_tokens: int = 768) -> None:
        self.model = model
        self.max_output_tokens = max_output_tokens

    def propose(
        self, runtime: AiRuntime, ledger: Sequence[StrategyNote], pool: Sequence[StrategyStats], why: str
    ) -> tuple[Direction, Conversation]:
        chat = Conversation(self.agent, self.model, _ONE_CALL, max_output_tokens=self.max_output_tokens)
        system = render("proposer_system")
        tried = sorted({note.note for note in ledger if note.note} | {s.name for s in pool})
        user = render("proposer_user", why=why, pool=list(pool), tried=tried)
        chat.add(Message("system", system.text), template=system.ref)
        chat.add(Message("user", user.text), template=user.ref)
        try:
            ideas = _ideas(_json_object(chat.ask(runtime, response_schema=PROPOSER_SCHEMA).text))
        except (Discard, ValueError) as error:
            return Direction("none", f"the proposer's answer was not usable ({error})"), chat
        known = {_key(name) for name in tried}
        fresh = [idea for idea in ideas if _key(idea[0]) not in known]
        if not fresh:
            return Direction("none", "the proposer only named strategies the ledger already holds"), chat
        name, description = fresh[0]
        return Direction("new", why, name, description), chat


def _ideas(answer: dict[str, Any]) -> list[tuple[str, str]]:
    ideas = answer.get("ideas")
    if not isinstance(ideas, list):
        raise ValueError("no 'ideas' array")
    named = []
    for idea in ideas:
        if isinstance(idea, dict) and str(idea.get("name") or "").strip():
            named.append((" ".join(str(idea["name"]).split())[:80],
                          " ".join(str(idea.get("description") or "").split())[:600]))  # fmt: skip
    if not named:
        raise ValueError("the 'ideas' array names no idea")
    return named


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", name.lower()).strip()


def _json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer, which may wrap it in prose or a ``` fence."""
    found = first_json_object(text or "")
    if found is None:
        raise ValueError("no JSON object in the answer")
    return found
