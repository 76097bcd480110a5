"""The trace of one question's run: the evaluation row's observation (``evaluations.observation``, JSON).

It is the paper's O(p, τ) for a data agent: everything the run did, in the order it did it, and nothing that
depends on when or how fast it ran (no timings, no cache hit flags), so a rerun from the response cache gives the
same trace, byte for byte:

- ``question_id``, ``model``, ``prompt``: the system prompt's sha256 and length (the prompt is the spec rendered,
  and the spec is stored with the program), and the user turn (the question and its guidelines);
- ``messages``: the conversation after the system prompt: each assistant turn's text and tool calls, and for each
  tool turn the index of its step (the result itself is in ``steps``);
- ``steps``: each tool call with its arguments, the SQL that was checked (the model's query, or the tool's query
  with its arguments bound), the tables it read, and its bounded result or its one-line error;
- ``answer`` (the final assistant text, or null), ``stop`` (``answer``, or why the run stopped: a budget, a
  failed model call) and ``usage`` (model turns, input and output tokens).

The expected answer is never in a trace: the runtime never receives it.

`bounded` keeps a trace under `MAX_TRACE_CHARS` of JSON by emptying the rows of the earliest steps first, then
cutting long assistant texts, deterministically. `read_sections` and `checked_queries` are what the offline
operators and the history tools read back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from coco_sql.languages.agent_spec.pack import DOCUMENTS_TABLE

TRACE_VERSION = 1
MAX_TRACE_CHARS = 60_000
MAX_MESSAGE_CHARS = 4_000


def new_trace(question_id: str, model: str, system_prompt: str, user_prompt: str) -> dict[str, Any]:
    return {
        "version": TRACE_VERSION,
        "question_id": question_id,
        "model": model,
        "prompt": {"sha256": hashlib.sha256(system_prompt.encode()).hexdigest(), "chars": len(system_prompt)},
        "user": user_prompt[:MAX_MESSAGE_CHARS],
        "messages": [],
        "steps": [],
        "answer": None,
        "stop": None,
        "usage": {"turns": 0, "input_tokens": 0, "output_tokens": 0},
    }


def add_assistant(trace: dict[str, Any], text: str, calls: list[dict[str, Any]]) -> None:
    turn: dict[str, Any] = {"role": "assistant", "content": _cut(text)}
    if calls:
        turn["tool_calls"] = calls
    trace["messages"].append(turn)


def add_step(trace: dict[str, Any], call_id: str, step: Mapping[str, Any]) -> None:
    trace["messages"].append({"role": "tool", "tool_call_id": call_id, "step": len(trace["steps"])})
    trace["steps"].append(dict(step))


def bounded(trace: dict[str, Any], limit: int = MAX_TRACE_CHARS) -> dict[str, Any]:
    """`trace` cut to at most `limit` characters of JSON (rows of the earliest steps first, then texts)."""
    if _size(trace) <= limit:
        return trace
    trace = json.loads(json.dumps(trace))
    for step in trace["steps"]:
        if step.get("rows"):
            step["rows"], step["rows_dropped"] = [], True
            if _size(trace) <= limit:
                return trace
    for message in trace["messages"]:
        if len(message.get("content") or "") > 200:
            message["content"] = message["content"][:200] + "…"
            if _size(trace) <= limit:
                return trace
    trace["steps"] = [
        {"tool": s.get("tool"), "error": s.get("error"), "dropped": True} for s in trace["steps"]
    ]
    return trace


def encode(trace: Mapping[str, Any]) -> str:
    """The trace as stored: canonical JSON (sorted keys), so equal traces are equal text."""
    return json.dumps(trace, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def checked_queries(trace: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The steps whose SQL ran without an error, in order."""
    for step in trace.get("steps", []):
        if step.get("sql") and not step.get("error"):
            yield step


def read_sections(trace: Mapping[str, Any]) -> list[str]:
    """The document sections (``manual#5``) whose rows a tool call returned, in the order first read."""
    found: list[str] = []
    for step in checked_queries(trace):
        if DOCUMENTS_TABLE not in step.get("tables", []) or "section" not in step.get("columns", []):
            continue
        column = step["columns"].index("section")
        for row in step.get("rows", []):
            if isinstance(row[column], str) and row[column] not in found:
                found.append(row[column])
    return found


def _cut(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def _size(trace: Mapping[str, Any]) -> int:
    return len(encode(trace))
