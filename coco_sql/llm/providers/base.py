"""What every AI provider offers, whatever it runs on: completions, embeddings, or both.

The AI functions (`engines.duckdb.ai.functions`) speak only this interface. A provider makes ONE call at a time and raises a
`ProviderError` subclass when it fails; batching, the thread pool, rate limits, retries and deadlines live in
`llm.execution`, around any provider. Providers are constructed lazily by the router (`llm.routing`):
importing this package touches no network and loads no model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from coco_sql.errors import CallCancelled


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: a name, what it does, and its arguments as a JSON Schema object."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for. `arguments` is None when the model's arguments are not a JSON object
    (`raw_arguments` keeps what it sent, so the caller can tell it so)."""

    id: str
    name: str
    arguments: Mapping[str, Any] | None
    raw_arguments: str = ""


@dataclass(frozen=True)
class Message:
    """One chat turn. An assistant turn may carry `tool_calls`; a `tool` turn answers the call `tool_call_id`."""

    role: str  # system | user | assistant | tool
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True)
class CompletionRequest:
    """One chat completion. `response_schema` asks for JSON output that follows this JSON Schema; `tools` are
    offered to the model, and `tool_choice` is "auto", "required", "none" or the name of one tool to force."""

    model: str
    messages: tuple[Message, ...]
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    response_schema: Mapping[str, Any] | None = None
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str | None = None


@dataclass(frozen=True)
class CompletionResult:
    text: str
    input_tokens: int
    output_tokens: int
    latency_ms: float
    model: str = ""  # the model the endpoint says answered, when it says
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None  # stop | length | tool_calls (OpenAI's names; Anthropic's are mapped)

    def as_message(self) -> Message:
        """The answer as the assistant turn to append to the conversation."""
        return Message("assistant", self.text, self.tool_calls)


@dataclass(frozen=True)
class EmbeddingResult:
    vectors: np.ndarray  # (n, dim) float32, L2-normalised
    input_tokens: int
    latency_ms: float


@dataclass
class Deadline:
    """When an evaluation must stop, and a flag that stops it early. Shared by every call of one evaluation.

    DuckDB's interrupt cannot stop a Python UDF mid-chunk, so every call checks this before it starts, and waits
    (backoff sleeps, HTTP timeouts) never run past it.
    """

    expires_at: float | None = None  # time.monotonic() value; None = no deadline
    cancelled: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        return cls(None if seconds is None else time.monotonic() + seconds)

    def remaining(self) -> float | None:
        return None if self.expires_at is None else self.expires_at - time.monotonic()

    def cancel(self) -> None:
        self.cancelled.set()

    def check(self, provider: str) -> None:
        """Raise CallCancelled when cancelled or past the deadline."""
        if self.cancelled.is_set():
            raise CallCancelled(provider, "cancelled")
        left = self.remaining()
        if left is not None and left <= 0:
            raise CallCancelled(provider, "evaluation deadline passed")

    def sleep(self, seconds: float, provider: str) -> None:
        """Sleep up to `seconds`, waking (and raising CallCancelled) on cancel or deadline."""
        left = self.remaining()
        if left is not None and left < seconds:
            self.cancelled.wait(max(left, 0.0))
            self.check(provider)
            raise CallCancelled(provider, "evaluation deadline passed")
        if self.cancelled.wait(seconds):
            raise CallCancelled(provider, "cancelled")

    def timeout(self, per_call_s: float) -> float:
        """The timeout for one call: its own limit, cut to what is left of the deadline."""
        left = self.remaining()
        return per_call_s if left is None else max(0.001, min(per_call_s, left))


NO_DEADLINE = Deadline()


@runtime_checkable
class CompletionProvider(Protocol):
    name: str

    def complete(self, request: CompletionRequest, deadline: Deadline) -> CompletionResult: ...


@runtime_checkable
class EmbeddingProvider(Protocol):
    name: str

    def embed(self, model: str, texts: Sequence[str], deadline: Deadline) -> EmbeddingResult: ...


@dataclass(frozen=True)
class ProviderLimits:
    """Per-provider limits, enforced by `llm.execution` around every call."""

    concurrency: int = 4  # calls in flight at once
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None  # estimated input + requested output tokens
    timeout_s: float = 60.0  # one attempt of one call
    max_retries: int = 4  # on 429, 5xx and timeouts
    backoff_s: float = 0.5  # first backoff; doubles per retry, with deterministic jitter
    max_backoff_s: float = 20.0
    # Run calls one at a time on the caller's thread: for a provider bound to a session that belongs to that
    # thread (Snowpark's session inside a stored procedure). The deadline is then checked between attempts only.
    caller_thread: bool = False


def estimate_tokens(text: str) -> int:
    """A provider-independent token estimate (about 4 characters per token), for limits and AI_COUNT_TOKENS."""
    return max(1, (len(text) + 3) // 4) if text else 0
