"""Anthropic's Messages API (POST {base_url}/v1/messages), completions only.

Errors map as in `openai_compat.JsonHttpClient`, which also keeps connections alive; Anthropic's 529 "overloaded" is a retryable `ProviderServerError`.
The API has no JSON mode: for `response_schema` the provider adds a system instruction with the schema and
returns the first JSON object found in the answer, re-serialised.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from coco_sql.errors import ProviderResponseError
from coco_sql.llm.providers.base import CompletionRequest, CompletionResult, Deadline
from coco_sql.llm.providers.openai_compat import JsonHttpClient, completion_result, json_field
from coco_sql.llm.providers.tool_wire import (
    anthropic_finish_reason,
    anthropic_messages,
    anthropic_tool_calls,
    anthropic_tools,
)

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024  # the API requires max_tokens on every request


def json_instruction(schema: Any) -> str:
    """The system-prompt text that asks for JSON matching `schema`."""
    return "Answer with a single JSON object and nothing else. It must match this JSON Schema: " + json.dumps(
        schema, sort_keys=True
    )


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first `{...}` in `text` that parses as a JSON object (code fences and prose around it ignored)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


class AnthropicProvider:
    """Chat completions through Anthropic's Messages API.

    System messages are joined into the top-level `system` field; the others are sent in order as `messages`.
    The API key goes in the `x-api-key` header and never into messages or the repr. `timeout_s` caps one attempt;
    the attempt's `Deadline` may cut it further.
    """

    def __init__(
        self,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        name: str = "anthropic",
        timeout_s: float = 60.0,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.default_max_tokens = default_max_tokens
        self._headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            self._headers["x-api-key"] = api_key
        self._http = JsonHttpClient(name)

    def __repr__(self) -> str:
        return f"AnthropicProvider(name={self.name!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the kept-alive connections (the provider stays usable and reconnects)."""
        self._http.close()

    def complete(self, request: CompletionRequest, deadline: Deadline) -> CompletionResult:
        """One completion. Raises CallCancelled before sending if the deadline passed, else as
        `JsonHttpClient.post`;
        ProviderResponseError when the answer has no text, or no JSON object although `response_schema` asked.
        """
        url = f"{self.base_url}/v1/messages"
        payload = self._payload(request)
        deadline.check(self.name)
        started = time.perf_counter()
        answer = self._http.post(url, payload, self._headers, deadline.timeout(self.timeout_s))
        latency_ms = (time.perf_counter() - started) * 1000.0
        blocks = json_field(self.name, url, answer, "content")
        if not isinstance(blocks, list):
            raise ProviderResponseError(self.name, f"answer from {url} has no content blocks")
        text = "".join(
            b["text"]
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
        calls = anthropic_tool_calls(blocks)
        if request.response_schema is not None:
            found = first_json_object(text)
            if found is None:
                raise ProviderResponseError(
                    self.name, f"answer from {url} holds no JSON object: {text[:80]!r}"
                )
            text = json.dumps(found)
        result = completion_result(request, answer, text, latency_ms, ("input_tokens", "output_tokens"))
        return replace(
            result, tool_calls=calls, finish_reason=anthropic_finish_reason(answer.get("stop_reason"))
        )

    def _payload(self, request: CompletionRequest) -> dict[str, Any]:
        system = [m.content for m in request.messages if m.role == "system"]
        if request.response_schema is not None:
            system.append(json_instruction(request.response_schema))
        payload: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens if request.max_tokens is not None else self.default_max_tokens,
            "messages": anthropic_messages(request.messages),
            **anthropic_tools(request.tools, request.tool_choice),
        }
        if system:
            payload["system"] = "\n\n".join(system)
        if request.temperature is not None:
            payload["temperature"] = request.temperature
        if request.top_p is not None:
            payload["top_p"] = request.top_p
        return payload
