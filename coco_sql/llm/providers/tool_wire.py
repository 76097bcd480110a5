"""Tool calling in three wire formats: messages, tool definitions and tool choice out; tool calls back.

OpenAI (chat completions):
    tools        [{"type": "function", "function": {"name", "description", "parameters"}}]
    tool_choice  "auto" | "required" | "none" | {"type": "function", "function": {"name": N}}
    assistant    {"role": "assistant", "content": text ("" when empty: llama.cpp's server refuses null),
                  "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}]}
    tool result  {"role": "tool", "tool_call_id": id, "content": text}

Anthropic (messages):
    tools        [{"name", "description", "input_schema"}]
    tool_choice  {"type": "auto"} | {"type": "any"} | {"type": "none"} | {"type": "tool", "name": N}
    assistant    {"role": "assistant", "content": [{"type": "text", "text"}, {"type": "tool_use", "id", "name",
                  "input": {...}}]}
    tool result  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text}]};
                 consecutive results go into one user turn, as the API requires.

Prompted (for chat endpoints without native tool calling, e.g. Cortex COMPLETE in SQL):
    tools        in a system instruction (`prompted_tools_instruction`) that fixes the reply protocol:
                 either the answer alone (any text without "tool_calls"), or exactly one JSON object
                 {"tool_calls": [{"name": N, "arguments": {...}}, ...]} (a ```json fence around it allowed)
    assistant    its calls re-encoded as that JSON object (with "content" when the turn also had text)
    tool result  a user turn: the line "[tool result: N]", then the result's text
    calls back   `prompted_tool_calls` parses a reply; a reply that names "tool_calls" but is not that object
                 raises `ToolProtocolError`. Ids are `<prefix><position>`: the protocol carries none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from coco_sql.bounded import json_value
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
                    "content": m.content or "",
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


class ToolProtocolError(ValueError):
    """A prompted reply that tries to call tools but breaks the reply protocol; the message says how."""


_CALLS_KEY = re.compile(r'"tool_calls"\s*:')
_FENCE = re.compile(r"\A```[A-Za-z]*\s*\n(?P<body>.*?)\n?```\Z", re.DOTALL)


def prompted_tools_instruction(tools: Sequence[ToolSpec], choice: str | None) -> str:
    """The system text that offers `tools` and fixes the reply protocol; "" when no tool is offered."""
    if not tools or choice == "none":
        return ""
    specs = [{"name": t.name, "description": t.description, "parameters": dict(t.parameters)} for t in tools]
    lines = [
        "You can call these tools (parameters are JSON Schema):",
        json.dumps(specs, sort_keys=True),
        "To call tools, reply with exactly one JSON object and nothing else, in this form:",
        '{"tool_calls": [{"name": "<tool name>", "arguments": {<the arguments as a JSON object>}}]}',
        "You may call several tools in one reply. Each result comes back in a user turn that starts with "
        '"[tool result: <tool name>]".',
        'To answer without calling a tool, reply with the answer alone (no "tool_calls" in it).',
    ]
    if choice == "required":
        lines.append("In this reply you must call at least one tool.")
    elif choice not in (None, "auto"):
        lines.append(f"In this reply you must call the tool {choice!r}.")
    return "\n".join(lines)


def prompted_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    """The turns as plain {role, content} pairs: tool calls as protocol JSON, tool results as user turns."""
    names: dict[str | None, str] = {}
    encoded: list[dict[str, str]] = []
    for m in messages:
        if m.role == "tool":
            name = names.get(m.tool_call_id, "unknown")
            encoded.append({"role": "user", "content": f"[tool result: {name}]\n{m.content}"})
        elif m.tool_calls:
            names.update((call.id, call.name) for call in m.tool_calls)
            calls = [{"name": c.name, "arguments": _arguments_value(c)} for c in m.tool_calls]
            reply: dict[str, Any] = {"content": m.content} if m.content else {}
            encoded.append({"role": "assistant", "content": json.dumps({**reply, "tool_calls": calls})})
        else:
            encoded.append({"role": m.role, "content": m.content})
    return encoded


def prompted_tool_calls(text: str, id_prefix: str) -> tuple[str, tuple[ToolCall, ...]]:
    """(answer text, tool calls) of a prompted reply. Plain text is the answer, with no calls.

    Raises ToolProtocolError when the reply names "tool_calls" but is not exactly one protocol object, or a
    call has no name. Arguments that are not a JSON object are kept raw (`ToolCall.arguments` None), as the
    OpenAI format does.
    """
    if not _CALLS_KEY.search(text):
        return text, ()
    body = text.strip()
    fenced = _FENCE.match(body)
    try:
        reply = json_value(fenced.group("body") if fenced else body)
    except ValueError:
        raise ToolProtocolError(
            f"a tool-call reply must be one JSON object and nothing else, got {_snippet(text)}"
        ) from None
    calls = reply.get("tool_calls") if isinstance(reply, dict) else None
    if not isinstance(calls, list) or not calls:
        raise ToolProtocolError(f'"tool_calls" must be a non-empty list of calls, got {_snippet(text)}')
    content = reply.get("content")
    return (content if isinstance(content, str) else ""), tuple(
        _prompted_call(call, f"{id_prefix}{position}") for position, call in enumerate(calls)
    )


def _prompted_call(call: Any, call_id: str) -> ToolCall:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
        raise ToolProtocolError(f'each tool call needs a "name" string, got {_snippet(json.dumps(call))}')
    raw = call.get("arguments", {})
    raw_text = raw if isinstance(raw, str) else json.dumps(raw)
    return ToolCall(call_id, call["name"], _parse_object(raw), raw_text)


def _arguments_value(call: ToolCall) -> Any:
    """The call's arguments as JSON would carry them: the object, else the raw text the model sent."""
    return dict(call.arguments) if call.arguments is not None else call.raw_arguments


def _snippet(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")


def _arguments_text(call: ToolCall) -> str:
    return json.dumps(dict(call.arguments)) if call.arguments is not None else call.raw_arguments


def _parse_object(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return None
    try:
        value = json_value(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _is_tool_results(content: Any) -> bool:
    return isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )
