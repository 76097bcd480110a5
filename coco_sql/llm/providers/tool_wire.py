"""Tool calling in the two wire formats: messages, tool definitions and tool choice out; tool calls back.

OpenAI (chat completions):
    tools        [{"type": "function", "function": {"name", "description", "parameters"}}]
    tool_choice  "auto" | "required" | "none" | {"type": "function", "function": {"name": N}}
    assistant    {"role": "assistant", "content": text | null, "tool_calls": [{"id", "type": "function",
                  "function": {"name", "arguments": "<JSON text>"}}]}
    tool result  {"role": "tool", "tool_call_id": id, "content": text}

Anthropic (messages):
    tools        [{"name", "description", "input_schema"}]
    tool_choice  {"type": "auto"} | {"type": "any"} | {"type": "none"} | {"type": "tool", "name": N}
    assistant    {"role": "assistant", "content": [{"type": "text", "text"}, {"type": "tool_use", "id", "name",
                  "input": {...}}]}
    tool result  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text}]};
                 consecutive results go into one user turn, as the API requires.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from coco_sql.llm.providers.base import Message, ToolCall, ToolSpec

_ANTHROPIC_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
}


def openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    encoded: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            encoded.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.tool_calls:
            encoded.append(
                {
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": _arguments_text(call)},
                        }
                        for call in m.tool_calls
                    ],
                }
            )
        else:
            encoded.append({"role": m.role, "content": m.content})
    return encoded


def openai_tools(tools: Sequence[ToolSpec], choice: str | None) -> dict[str, Any]:
    if not tools:
        return {}
    payload: dict[str, Any] = {
        "tools": [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
            }
            for t in tools
        ]
    }
    if choice in ("auto", "required", "none"):
        payload["tool_choice"] = choice
    elif choice is not None:
        payload["tool_choice"] = {"type": "function", "function": {"name": choice}}
    return payload


def openai_tool_calls(message: Any) -> tuple[ToolCall, ...]:
    """The tool calls of an OpenAI answer's `choices[0].message` (malformed entries are skipped)."""
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(calls, list):
        return ()
    found = []
    for position, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        raw = function.get("arguments")
        raw_text = raw if isinstance(raw, str) else json.dumps(raw)
        found.append(
            ToolCall(
                str(call.get("id") or f"call_{position}"), function["name"], _parse_object(raw), raw_text
            )
        )
    return tuple(found)


def anthropic_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The non-system turns in Anthropic's shape (system text goes to the top-level `system` field)."""
    encoded: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            previous = encoded[-1] if encoded else None
            if previous is not None and previous["role"] == "user" and _is_tool_results(previous["content"]):
                previous["content"].append(block)
            else:
                encoded.append({"role": "user", "content": [block]})
        elif m.tool_calls:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments or {})}
                for c in m.tool_calls
            ]
            encoded.append({"role": "assistant", "content": blocks})
        else:
            encoded.append({"role": m.role, "content": m.content})
    return encoded


def anthropic_tools(tools: Sequence[ToolSpec], choice: str | None) -> dict[str, Any]:
    if not tools:
        return {}
    payload: dict[str, Any] = {
        "tools": [
            {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)} for t in tools
        ]
    }
    if choice is not None:
        named = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
        payload["tool_choice"] = named.get(choice, {"type": "tool", "name": choice})
    return payload


def anthropic_tool_calls(blocks: Sequence[Any]) -> tuple[ToolCall, ...]:
    return tuple(
        ToolCall(str(b.get("id")), b["name"], _parse_object(b.get("input")), json.dumps(b.get("input")))
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("name"), str)
    )


def anthropic_finish_reason(stop_reason: Any) -> str | None:
    return _ANTHROPIC_STOP.get(stop_reason) if isinstance(stop_reason, str) else None


def _arguments_text(call: ToolCall) -> str:
    return json.dumps(dict(call.arguments)) if call.arguments is not None else call.raw_arguments


def _parse_object(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _is_tool_results(content: Any) -> bool:
    return isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )
