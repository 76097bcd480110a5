"""The Cortex provider against Snowpark's LOCAL TESTING mode: the real Snowpark API, COMPLETE patched.

What works in local testing (Snowpark 1.56), and is what the provider sends: a one-row
`session.create_dataframe([Row()])` selecting `call_function("snowflake.cortex.complete", lit(model),
lit([{role, content}, ...]), lit({options}))`, collected with `statement_params`. The patch target is the
lowercase name `snowflake.cortex.complete` (`snowflake.snowpark.mock.patch`): an uppercase registration is
never found, and a function without annotations on every parameter fails with KeyError. The patched function
gets `ColumnEmulator`s whose cells are the Python str / list of dicts / dict the SQL literals stand for, and
returns a `ColumnEmulator` of strings. Not available: `session.sql`. An exception raised by the patched
function reaches the caller as `SnowparkLocalTestingException` (a `SnowparkSQLException`) with the original
as its `__cause__`; with no patch registered, the call raises NotImplementedError.

`FakeCortex` is the remote model: it answers with COMPLETE's documented JSON (`choices[0].messages`, `usage`)
and follows the prompted tool protocol when tools are offered: it calls `add` once, then reports the result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from snowflake.snowpark import Session
from snowflake.snowpark.exceptions import SnowparkSQLException
from snowflake.snowpark.mock import ColumnEmulator, ColumnType, patch
from snowflake.snowpark.mock._functions import MockedFunctionRegistry  # no public unregister
from snowflake.snowpark.types import StringType

from coco_sql.errors import (
    CallCancelled,
    ConfigError,
    ProviderError,
    ProviderRateLimited,
    ProviderResponseError,
)
from coco_sql.llm.providers.base import CompletionRequest, Deadline, Message, ToolSpec
from coco_sql.llm.providers.cortex import COMPLETE_FUNCTION, CortexProvider
from coco_sql.llm.routing import AiConfig, EndpointConfig
from coco_sql.llm.runtime import AiRuntime

MODEL = "mistral-large2"
ADD = ToolSpec(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
Reply = str | Exception  # the reply text COMPLETE's model gives, or the error the statement fails with


@dataclass
class FakeCortex:
    """Records every call (model, conversation, options) and answers with `script(conversation)`."""

    script: Callable[[list[dict[str, str]]], Reply]
    calls: list[tuple[str, list[dict[str, str]], dict[str, Any]]] = field(default_factory=list)
    raw: Callable[[str, str], Any] | None = None  # replaces the documented answer document, when set

    def complete(self, model: str, history: list[dict[str, str]], options: dict[str, Any]) -> Any:
        self.calls.append((model, history, options))
        reply = self.script(history)
        if isinstance(reply, Exception):
            raise reply
        if self.raw is not None:
            return self.raw(model, reply)
        prompt_tokens = sum(len(turn["content"].split()) for turn in history)
        completion_tokens = len(reply.split())
        return json.dumps(
            {
                "choices": [{"messages": reply}],
                "created": 1_700_000_000,
                "model": model,
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )


def adder(history: list[dict[str, str]]) -> str:
    """A model that follows the tool protocol: calls `add` (in a fenced block), then reports its result."""
    last = history[-1]["content"]
    if found := re.match(r"\[tool result: add\]\n(.*)", last, re.S):
        return f"the sum is {found.group(1)}"
    if "tool_calls" in history[0]["content"]:
        return '```json\n{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}\n```'
    return "no tools, no sum"


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    local = Session.builder.config("local_testing", True).create()
    yield local
    local.close()


@pytest.fixture
def cortex() -> Iterator[FakeCortex]:
    """FakeCortex patched in as COMPLETE; unregistered after the test (the registry is process-global)."""
    fake = FakeCortex(adder)

    @patch(COMPLETE_FUNCTION)
    def complete(model: ColumnEmulator, history: ColumnEmulator, options: ColumnEmulator) -> ColumnEmulator:
        answers = [fake.complete(*row) for row in zip(model, history, options, strict=True)]
        return ColumnEmulator(data=answers, sf_type=ColumnType(StringType(), True))

    yield fake
    MockedFunctionRegistry.get_or_create().unregister(COMPLETE_FUNCTION)


def ask(session: Session, *messages: Message, **fields: Any) -> Any:
    return CortexProvider(session).complete(CompletionRequest(MODEL, messages, **fields), Deadline())


def assert_one_line_error(error: ProviderError, *needles: str) -> None:
    assert "\n" not in str(error) and str(error).startswith("AI provider 'cortex': ")
    for needle in needles:
        assert needle in str(error)


def test_a_plain_chat_returns_the_reply_and_its_token_counts(session: Session, cortex: FakeCortex) -> None:
    result = ask(
        session, Message("system", "Be brief."), Message("user", "Say hi"), temperature=0.2, max_tokens=64
    )
    assert (result.text, result.input_tokens, result.output_tokens) == ("no tools, no sum", 4, 4)
    assert (result.tool_calls, result.finish_reason, result.model) == ((), "stop", MODEL)
    ((model, history, options),) = cortex.calls
    assert model == MODEL
    assert history == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}]
    assert options == {"temperature": 0.2, "max_tokens": 64}


def test_the_conversation_follows_complete_s_documented_shape(session: Session, cortex: FakeCortex) -> None:
    """One system turn and first; user and assistant alternate; temperature 0 is sent, not dropped."""
    ask(
        session,
        Message("system", "A"),
        Message("user", "B"),
        Message("user", "C"),
        Message("assistant", "D"),
        Message("system", "E"),
        Message("user", "F"),
        temperature=0.0,
        top_p=0.9,
    )
    ((_, history, options),) = cortex.calls
    assert history == [
        {"role": "system", "content": "A\n\nE"},
        {"role": "user", "content": "B\n\nC"},
        {"role": "assistant", "content": "D"},
        {"role": "user", "content": "F"},
    ]
    assert options == {"temperature": 0.0, "top_p": 0.9}


def test_a_tool_call_round_trip(session: Session, cortex: FakeCortex) -> None:
    conversation = (Message("system", "You add numbers."), Message("user", "What is 2 + 3?"))
    first = ask(session, *conversation, tools=(ADD,), tool_choice="auto", max_tokens=64)
    (call,) = first.tool_calls
    assert (call.id, call.name, call.arguments, first.finish_reason) == (
        "call_0_0",
        "add",
        {"a": 2, "b": 3},
        "tool_calls",
    )
    system = cortex.calls[0][1][0]
    assert system["role"] == "system" and system["content"].startswith("You add numbers.\n\n")
    assert '"name": "add"' in system["content"] and '{"tool_calls": [' in system["content"]

    follow_up = (*conversation, first.as_message(), Message("tool", "5", tool_call_id=call.id))
    final = ask(session, *follow_up, tools=(ADD,), max_tokens=64)
    assert (final.text, final.tool_calls, final.finish_reason) == ("the sum is 5", (), "stop")
    history = cortex.calls[1][1]
    assert [turn["role"] for turn in history] == ["system", "user", "assistant", "user"]
    assert json.loads(history[2]["content"]) == {
        "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]
    }
    assert history[3]["content"] == "[tool result: add]\n5"


def test_several_calls_in_one_reply_get_ids_unique_in_the_conversation(
    session: Session, cortex: FakeCortex
) -> None:
    cortex.script = lambda history: json.dumps(
        {
            "content": "two sums",
            "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "add"}],
        }
    )
    earlier = (Message("user", "go"), Message("assistant", "ok"), Message("user", "again"))
    result = ask(session, *earlier, tools=(ADD,), tool_choice="required")
    assert [(c.id, c.arguments) for c in result.tool_calls] == [
        ("call_1_0", {"a": 1, "b": 2}),
        ("call_1_1", {}),
    ]
    assert result.text == "two sums"
    assert "must call at least one tool" in cortex.calls[0][1][0]["content"]


@pytest.mark.parametrize(
    "reply",
    [
        '{"tool_calls": [{"name": "add", "arguments": {"a": 2',  # cut off
        'Sure, calling it: {"tool_calls": [{"name": "add", "arguments": {}}]}',  # prose around the object
        '{"tool_calls": {"name": "add", "arguments": {}}}',  # not a list
        '{"tool_calls": [{"arguments": {"a": 1}}]}',  # no name
    ],
)
def test_a_reply_that_breaks_the_tool_protocol_is_a_one_line_error(
    session: Session, cortex: FakeCortex, reply: str
) -> None:
    cortex.script = lambda history: reply
    with pytest.raises(ProviderResponseError) as caught:
        ask(session, Message("user", "What is 2 + 3?"), tools=(ADD,))
    assert_one_line_error(caught.value, repr(MODEL), "broke the tool-call protocol")


def test_arguments_that_are_not_an_object_are_kept_raw_not_guessed(
    session: Session, cortex: FakeCortex
) -> None:
    cortex.script = lambda history: '{"tool_calls": [{"name": "add", "arguments": "{a: 2"}]}'
    (call,) = ask(session, Message("user", "hi"), tools=(ADD,)).tool_calls
    assert call.arguments is None and call.raw_arguments == "{a: 2"


def test_without_tools_a_protocol_lookalike_is_just_text(session: Session, cortex: FakeCortex) -> None:
    cortex.script = lambda history: '{"tool_calls": "none here"}'
    assert (
        ask(session, Message("user", "hi"), tools=(ADD,), tool_choice="none").text
        == '{"tool_calls": "none here"}'
    )
    assert "tool_calls" not in json.dumps(cortex.calls[0][1])


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (
            "100351 (P0000): Request failed for external function COMPLETE$V6 with remote service error:\n"
            '400 \'"unknown model \\"mistral-large2\\""\'',
            ProviderResponseError,
        ),
        ("100351 (P0000): 429 too many requests: Cortex throttled this account", ProviderRateLimited),
    ],
)
def test_a_cortex_error_is_a_one_line_provider_error_naming_the_model(
    session: Session, cortex: FakeCortex, message: str, kind: type[ProviderError]
) -> None:
    cortex.script = lambda history: SnowparkSQLException(message, error_code="1304")
    with pytest.raises(kind) as caught:
        ask(session, Message("user", "hi"))
    assert type(caught.value) is kind
    assert_one_line_error(caught.value, f"model {MODEL!r}", "100351 (P0000)")


@pytest.mark.parametrize(
    "answer",
    [
        lambda model, reply: "not json",
        lambda model, reply: json.dumps({"choices": []}),
        lambda model, reply: None,
    ],
)
def test_an_answer_not_in_the_documented_shape_is_a_one_line_error(
    session: Session, cortex: FakeCortex, answer: Callable[[str, str], Any]
) -> None:
    cortex.raw = answer
    with pytest.raises(ProviderResponseError) as caught:
        ask(session, Message("user", "hi"))
    assert_one_line_error(caught.value, repr(MODEL), "SNOWFLAKE.CORTEX.COMPLETE answered")


def test_a_response_schema_goes_to_complete_s_response_format(session: Session, cortex: FakeCortex) -> None:
    schema = {"type": "object", "properties": {"label": {"type": "string"}}}
    cortex.script = lambda history: '```json\n{"label": "spam"}\n```'
    result = ask(session, Message("user", "classify"), response_schema=schema)
    assert json.loads(result.text) == {"label": "spam"}
    assert cortex.calls[0][2] == {"response_format": {"type": "json", "schema": schema}}


def test_a_passed_deadline_sends_nothing(session: Session, cortex: FakeCortex) -> None:
    provider = CortexProvider(session)
    with pytest.raises(CallCancelled):
        provider.complete(CompletionRequest(MODEL, (Message("user", "hi"),)), Deadline.after(-1.0))
    assert cortex.calls == []


def test_cortex_models_route_only_with_a_session(session: Session) -> None:
    with pytest.raises(ConfigError, match="needs a Snowpark session"):
        AiConfig().route("cortex:claude-3-5-sonnet")
    config = AiConfig(snowpark_session=session, completion_endpoint="cortex")
    assert config.route("cortex:claude-3-5-sonnet") == ("cortex", "claude-3-5-sonnet")
    assert config.route("llama3.1-8b") == ("cortex", "llama3.1-8b")
    with pytest.raises(ConfigError, match="reserved"):
        AiConfig(endpoints={"cortex": EndpointConfig("openai", "http://127.0.0.1:1")})


def test_the_runtime_serves_cortex_models_through_the_session(session: Session, cortex: FakeCortex) -> None:
    runtime = AiRuntime(AiConfig(snowpark_session=session))
    try:
        with runtime.evaluation() as usage:
            (result,) = runtime.complete(
                "AI_COMPLETE", [CompletionRequest("cortex:llama3.1-8b", (Message("user", "hi"),))]
            )
    finally:
        runtime.close()
    assert not isinstance(result, ProviderError) and result.text == "no tools, no sum"
    assert cortex.calls[0][0] == "llama3.1-8b"
    (call,) = usage.provider_calls
    assert (call.provider, call.model, call.input_tokens, call.output_tokens) == (
        "cortex",
        "cortex:llama3.1-8b",
        1,
        4,
    )
