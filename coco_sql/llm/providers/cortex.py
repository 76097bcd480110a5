"""Snowflake Cortex COMPLETE over a Snowpark `Session`: chat inside the warehouse, with no API key anywhere.

The call: `SNOWFLAKE.CORTEX.COMPLETE(model, <array of {role, content}>, <options object>)`, the documented
conversation form of COMPLETE (docs.snowflake.com/en/sql-reference/functions/complete-snowflake-cortex).
With an options object (always sent, if only `{}`) the answer is a string holding a JSON object:
`{"choices": [{"messages": "<reply text>"}], "created": ..., "model": ..., "usage": {"prompt_tokens",
"completion_tokens", "total_tokens"}}`. Options sent: `temperature`, `top_p`, `max_tokens`, and for
`response_schema` `response_format: {"type": "json", "schema": ...}` (COMPLETE Structured Outputs).
The newer AI_COMPLETE is not used: its documented forms take one prompt string (or a prompt object, or an
image), not a conversation, so a multi-turn chat would have to be flattened into one string.

The documented rules for the array shape the messages: one system turn, and only first (every system text,
the tool protocol and any JSON instruction are joined into it); `user` and `assistant` turns alternate
(consecutive turns of one role are joined). COMPLETE in SQL has no native tool calling, so tools go through
the prompted protocol of `tool_wire`: tool specs and a strict JSON reply form in the system turn, and the
calls parsed from the reply.

It is issued through the DataFrame API, as snowflake-ml's `snowflake.cortex.complete` does it: a one-row
`session.create_dataframe([Row()])` selecting `call_function("snowflake.cortex.complete", lit(model),
lit(messages), lit(options))`, which Snowpark sends as `SNOWFLAKE.CORTEX.COMPLETE('m',
PARSE_JSON('[...]') :: ARRAY, PARSE_JSON('{...}') :: OBJECT)`. No `session.sql`: Snowpark's local testing
mode (which has none) runs it with `snowflake.snowpark.mock.patch("snowflake.cortex.complete")`.

Errors (one line each, naming the model): a Snowpark/SQL exception becomes `ProviderRateLimited` (429, quota,
throttling), `ProviderTimeout` (statement timeout, cancelled), `ProviderServerError` (5xx, internal error),
`ProviderUnavailable` (the session is closed or unusable) or `ProviderResponseError` (anything else, e.g. an
unknown model); an answer that is not the documented JSON, or a reply that breaks the tool protocol, is a
`ProviderResponseError`. The attempt's deadline bounds the statement through STATEMENT_TIMEOUT_IN_SECONDS.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from snowflake.snowpark import Row, Session
from snowflake.snowpark import functions as F
from snowflake.snowpark.exceptions import SnowparkClientException, SnowparkSessionException

from coco_sql.errors import (
    ProviderError,
    ProviderRateLimited,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeout,
    ProviderUnavailable,
)
from coco_sql.llm.providers.anthropic import first_json_object, json_instruction
from coco_sql.llm.providers.base import CompletionRequest, CompletionResult, Deadline, ToolCall
from coco_sql.llm.providers.openai_compat import completion_result
from coco_sql.llm.providers.tool_wire import (
    ToolProtocolError,
    prompted_messages,
    prompted_tool_calls,
    prompted_tools_instruction,
)

COMPLETE_FUNCTION = "snowflake.cortex.complete"  # also the name to patch in Snowpark's local testing mode
_WHERE = "SNOWFLAKE.CORTEX.COMPLETE"  # how error messages name what answered
_DETAIL_CHARS = 240

# The ProviderError a Cortex/SQL failure becomes, by its message: the first match, else ProviderResponseError.
_FAILURES: tuple[tuple[re.Pattern[str], type[ProviderError]], ...] = (
    (re.compile(r"\b429\b|too many requests|rate.?limit|throttl|quota", re.I), ProviderRateLimited),
    (re.compile(r"timeout|timed out|cancel", re.I), ProviderTimeout),
    (re.compile(r"\b5\d\d\b|internal error|service unavailable", re.I), ProviderServerError),
)


class CortexProvider:
    """Chat completions through Cortex COMPLETE in the warehouse the `session` is connected to.

    The session comes from the caller (a stored procedure's own session, or one the caller opened); the
    provider never opens or closes one. `timeout_s` caps one attempt, the attempt's `Deadline` may cut it
    further, and it is sent as the statement's STATEMENT_TIMEOUT_IN_SECONDS unless `statement_timeout=False`.
    """

    def __init__(
        self, session: Session, name: str = "cortex", timeout_s: float = 300.0, statement_timeout: bool = True
    ) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self.statement_timeout = statement_timeout
        self._session = session

    def __repr__(self) -> str:
        return f"CortexProvider(name={self.name!r})"

    def complete(self, request: CompletionRequest, deadline: Deadline) -> CompletionResult:
        """One completion. Raises CallCancelled before sending if the deadline passed, else a one-line
        ProviderError (module docstring) naming `request.model`."""
        messages = cortex_messages(request)
        options = cortex_options(request)
        deadline.check(self.name)
        started = time.perf_counter()
        raw = self._call(request.model, messages, options, deadline)
        latency_ms = (time.perf_counter() - started) * 1000.0
        answer, text = self._answer(request.model, raw)
        text, calls = self._tool_calls(request, text)
        if request.response_schema is not None and not calls:
            text = self._json_text(request.model, text)
        result = completion_result(request, answer, text, latency_ms, ("prompt_tokens", "completion_tokens"))
        return _with_calls(result, calls, request.max_tokens)

    def _call(
        self, model: str, messages: list[dict[str, str]], options: dict[str, Any], deadline: Deadline
    ) -> Any:
        """The value COMPLETE returned for the one row. Raises the mapped ProviderError (`cortex_failure`)."""
        call = F.call_function(COMPLETE_FUNCTION, F.lit(model), F.lit(messages), F.lit(options))
        params = {"STATEMENT_TIMEOUT_IN_SECONDS": math.ceil(deadline.timeout(self.timeout_s))}
        try:
            frame = self._session.create_dataframe([Row()]).select(call.alias("answer"))
            rows = frame.collect(statement_params=params if self.statement_timeout else None)
        except SnowparkClientException as error:
            raise cortex_failure(self.name, model, error) from error
        if len(rows) != 1:
            raise self._bad_answer(model, f"{len(rows)} rows instead of 1")
        return rows[0][0]

    def _answer(self, model: str, raw: Any) -> tuple[Mapping[str, Any], str]:
        """COMPLETE's answer as a JSON object (it arrives as a string; a VARIANT double may hand a dict), and
        its reply text `choices[0].messages`."""
        answer = raw
        if isinstance(raw, str):
            try:
                answer = json.loads(raw)
            except ValueError:
                answer = None
        if not isinstance(answer, Mapping):
            raise self._bad_answer(model, f"not a JSON object: {_one_line(str(raw))[:80]!r}")
        try:
            text = answer["choices"][0]["messages"]
        except (KeyError, IndexError, TypeError):
            text = None
        if not isinstance(text, str):
            raise self._bad_answer(model, "without a string at choices[0].messages")
        return answer, text

    def _tool_calls(self, request: CompletionRequest, text: str) -> tuple[str, tuple[ToolCall, ...]]:
        """The reply's text and tool calls; call ids are unique in the conversation (`call_<turn>_<position>`)."""
        if not _offers_tools(request):
            return text, ()
        turn = sum(1 for m in request.messages if m.role == "assistant")
        try:
            return prompted_tool_calls(text, id_prefix=f"call_{turn}_")
        except ToolProtocolError as error:
            raise ProviderResponseError(
                self.name, f"model {request.model!r} broke the tool-call protocol: {error}"
            ) from None

    def _json_text(self, model: str, text: str) -> str:
        found = first_json_object(text)
        if found is None:
            raise self._bad_answer(model, f"no JSON object although a response schema was set: {text[:80]!r}")
        return json.dumps(found)

    def _bad_answer(self, model: str, what: str) -> ProviderResponseError:
        return ProviderResponseError(self.name, f"model {model!r}: {_WHERE} answered {what}")


def cortex_messages(request: CompletionRequest) -> list[dict[str, str]]:
    """The conversation as COMPLETE's array: one leading system turn, then alternating user and assistant."""
    turns = prompted_messages(request.messages)
    system = [t["content"] for t in turns if t["role"] == "system" and t["content"]]
    system += [text for text in _instructions(request) if text]
    merged: list[dict[str, str]] = [{"role": "system", "content": "\n\n".join(system)}] if system else []
    for turn in (t for t in turns if t["role"] != "system"):
        if merged and merged[-1]["role"] == turn["role"]:
            merged[-1] = {"role": turn["role"], "content": f"{merged[-1]['content']}\n\n{turn['content']}"}
        else:
            merged.append(dict(turn))
    return merged


def cortex_options(request: CompletionRequest) -> dict[str, Any]:
    """COMPLETE's options object (always sent: with it COMPLETE takes a conversation and answers in JSON)."""
    options: dict[str, Any] = {
        key: value
        for key, value in (
            ("temperature", request.temperature),
            ("top_p", request.top_p),
            ("max_tokens", request.max_tokens),
        )
        if value is not None
    }
    if request.response_schema is not None and not _offers_tools(request):
        options["response_format"] = {"type": "json", "schema": dict(request.response_schema)}
    return options


def cortex_failure(provider: str, model: str, error: BaseException) -> ProviderError:
    """The one-line ProviderError for a failed COMPLETE statement (module docstring)."""
    detail = failure_detail(error)
    message = f"model {model!r}: {detail}"
    if isinstance(error, SnowparkSessionException):
        return ProviderUnavailable(provider, f"{message} (the Snowpark session cannot run statements)")
    for pattern, kind in _FAILURES:
        if pattern.search(detail):
            return kind(provider, message)
    return ProviderResponseError(provider, message)


def failure_detail(error: BaseException) -> str:
    """The most specific message of `error`: its innermost cause's (Snowpark's local testing mode wraps what
    the patched function raised), flattened to one line and shortened."""
    while error.__cause__ is not None:
        error = error.__cause__
    text = _one_line(str(error)) or type(error).__name__
    return text if len(text) <= _DETAIL_CHARS else text[:_DETAIL_CHARS] + "..."


def _instructions(request: CompletionRequest) -> list[str]:
    """System text this provider adds: the tool protocol, and the answer's JSON Schema when tools are offered
    (without tools the schema goes to `response_format`, which would also bind the tool-call replies)."""
    tools = prompted_tools_instruction(request.tools, request.tool_choice)
    if not tools or request.response_schema is None:
        return [tools]
    return [tools, "When you answer without calling a tool: " + json_instruction(request.response_schema)]


def _offers_tools(request: CompletionRequest) -> bool:
    return bool(prompted_tools_instruction(request.tools, request.tool_choice))


def _with_calls(
    result: CompletionResult, calls: tuple[ToolCall, ...], max_tokens: int | None
) -> CompletionResult:
    """`result` with its tool calls and a finish reason (COMPLETE gives none: "length" when the reply used
    every token `max_tokens` allowed)."""
    if calls:
        finish = "tool_calls"
    elif max_tokens is not None and result.output_tokens >= max_tokens:
        finish = "length"
    else:
        finish = "stop"
    return replace(result, tool_calls=calls, finish_reason=finish)


def _one_line(text: str) -> str:
    return " ".join(text.split())
