"""One model role's conversation within a mutation: its messages, transcript rows, spending and budgets.

The coding agent, the reflector and the proposer each hold one (`agent` names the role in `agent_turns` and in
`ai_usage`). Every model call goes through the run's model runtime, so it is cached by the whole request and a
resumed run replays it without a new call.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coco_sql.errors import ProviderError, ProviderUnavailable
from coco_sql.llm.providers.base import CompletionRequest, CompletionResult, Deadline, Message, ToolSpec
from coco_sql.llm.runtime import AiRuntime
from coco_sql.llm.usage import Usage
from coco_sql.store.records import AgentTurn


class Discard(Exception):
    """Ends a conversation without a result; the message says why (stored as the child's error)."""


@dataclass(frozen=True)
class Budget:
    """What one conversation may spend: model calls, prompt + completion tokens, and wall seconds."""

    max_turns: int
    max_tokens: int
    wall_s: float


@dataclass
class Conversation:
    """The messages of one role (`agent`) with one `model`, and what its calls cost so far."""

    agent: str
    model: str
    budget: Budget
    temperature: float | None = 0.0
    max_output_tokens: int = 1024
    started: float = field(default_factory=time.monotonic)
    messages: list[Message] = field(default_factory=list)
    transcript: list[AgentTurn] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    tokens: int = 0
    turns: int = 0

    def add(self, message: Message, *, template: str | None = None, tokens: tuple[int, int] = (0, 0),
            tool_name: str | None = None) -> None:  # fmt: skip
        self.messages.append(message)
        calls = tuple({"id": c.id, "name": c.name, "arguments": c.arguments if c.arguments is not None else c.raw_arguments}
                      for c in message.tool_calls)  # fmt: skip
        self.transcript.append(
            AgentTurn(self.agent, len(self.transcript), message.role, message.content, calls, message.tool_call_id,
                      tool_name, tokens[0], tokens[1], template, self.model if message.role == "assistant" else None)
        )  # fmt: skip

    def remaining_s(self) -> float:
        return self.budget.wall_s - (time.monotonic() - self.started)

    def ask(
        self,
        runtime: AiRuntime,
        *,
        tools: tuple[ToolSpec, ...] = (),
        tool_choice: str | None = None,
        response_schema: Mapping[str, Any] | None = None,
    ) -> CompletionResult:
        """One model call on the messages so far; its answer is appended as the assistant turn.

        Raises Discard when a budget is spent or the call fails, and ProviderUnavailable when the endpoint is
        gone (the run stops there and resumes later from the cache).
        """
        b = self.budget
        if self.turns >= b.max_turns:
            raise Discard(f"no commit within {b.max_turns} turns")
        if self.tokens >= b.max_tokens:
            raise Discard(f"the mutation's token budget ({b.max_tokens:,}) is spent")
        left = self.remaining_s()
        if left <= 0:
            raise Discard(f"no commit within {b.wall_s:g} s")
        request = CompletionRequest(
            self.model,
            tuple(self.messages),
            temperature=self.temperature,
            max_tokens=self.max_output_tokens,
            response_schema=response_schema,
            tools=tools,
            tool_choice=tool_choice,
        )
        with runtime.evaluation(Deadline.after(left)) as usage:
            (answer,) = runtime.complete(self.agent, [request])
        self.usage.merge(usage)
        self.turns += 1
        if isinstance(answer, ProviderUnavailable):
            raise answer
        if isinstance(answer, ProviderError):
            raise Discard(f"the model call failed: {' '.join(str(answer).split())[:300]}")
        self.tokens += answer.input_tokens + answer.output_tokens
        self.add(answer.as_message(), tokens=(answer.input_tokens, answer.output_tokens))
        return answer
