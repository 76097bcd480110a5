"""Chat with tools through the real clients, over HTTP, in both wire formats (OpenAI and Anthropic).

The endpoint is the local test double (a real HTTP server on 127.0.0.1) driven by a scripted model: it calls a
tool, reads the tool's result, and answers. The clients must encode tools, tool choice, tool calls and tool
results in each format, and decode the model's calls back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from llm_double import FakeEndpoint, Turn

from coco_sql.llm.providers.anthropic import AnthropicProvider
from coco_sql.llm.providers.base import CompletionRequest, Deadline, Message, ToolSpec
from coco_sql.llm.providers.openai_compat import OpenAICompatibleProvider

ADD = ToolSpec(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
SEEN: list[list[dict[str, Any]]] = []


def adder(conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
    """Calls `add` once, then reports the tool's answer."""
    SEEN.append(conversation)
    results = [turn for turn in conversation if turn["role"] == "tool"]
    if not results:
        return Turn("let me add", (("add", {"a": 2, "b": 3}),))
    return Turn(f"the sum is {results[-1]['content']}")


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    SEEN.clear()
    with FakeEndpoint(script=adder) as server:
        yield server


def providers(endpoint: FakeEndpoint) -> dict[str, Any]:
    return {
        "openai": OpenAICompatibleProvider(endpoint.base_url, name="openai"),
        "anthropic": AnthropicProvider(endpoint.root_url, name="anthropic"),
    }


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_tool_call_round_trip(endpoint: FakeEndpoint, wire: str) -> None:
    provider = providers(endpoint)[wire]
    conversation = (Message("system", "You add numbers."), Message("user", "What is 2 + 3?"))
    first = provider.complete(
        CompletionRequest("m", conversation, tools=(ADD,), tool_choice="auto", max_tokens=64), Deadline()
    )
    assert first.finish_reason == "tool_calls" and first.text == "let me add"
    (call,) = first.tool_calls
    assert (call.name, dict(call.arguments or {})) == ("add", {"a": 2, "b": 3})

    answered = (*conversation, first.as_message(), Message("tool", "5", tool_call_id=call.id))
    second = provider.complete(CompletionRequest("m", answered, tools=(ADD,), max_tokens=64), Deadline())
    assert second.text == "the sum is 5" and second.tool_calls == () and second.finish_reason == "stop"
    assert second.input_tokens > first.input_tokens > 0

    # the model saw its own call and the result tied to it, whatever the wire format
    last = SEEN[-1]
    assert last[-2]["tool_calls"][0][:2] == (call.id, "add")
    assert last[-1] == {"role": "tool", "tool_call_id": call.id, "content": "5"}


def test_each_wire_format_encodes_tools_and_choice_its_own_way(endpoint: FakeEndpoint) -> None:
    for provider in providers(endpoint).values():
        provider.complete(
            CompletionRequest(
                "m", (Message("user", "2 + 3?"),), tools=(ADD,), tool_choice="add", max_tokens=8
            ),
            Deadline(),
        )
    openai_body, anthropic_body = (r.body for r in endpoint.requests)
    assert openai_body["tools"] == [
        {
            "type": "function",
            "function": {"name": "add", "description": ADD.description, "parameters": ADD.parameters},
        }
    ]
    assert openai_body["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert anthropic_body["tools"] == [
        {"name": "add", "description": ADD.description, "input_schema": ADD.parameters}
    ]
    assert anthropic_body["tool_choice"] == {"type": "tool", "name": "add"}


def test_malformed_tool_arguments_are_kept_raw_not_guessed() -> None:
    with FakeEndpoint(script=lambda conversation, tools: Turn("", (("add", "{a: 2"),))) as server:
        provider = OpenAICompatibleProvider(server.base_url)
        result = provider.complete(CompletionRequest("m", (Message("user", "hi"),), tools=(ADD,)), Deadline())
    (call,) = result.tool_calls
    assert call.arguments is None and call.raw_arguments == "{a: 2" and result.text == ""
