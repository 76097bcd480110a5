"""The scripted data agent (tests/agent_model.py) as Cortex COMPLETE, for data agents run inside a Snowflake procedure
in Snowpark's local testing mode.

`CortexDataAgent` stands in for the remote model behind ``SNOWFLAKE.CORTEX.COMPLETE`` the way the other Snowpark
tests stand in for Cortex functions (`snowflake.snowpark.mock.patch`, tests/test_cortex_provider.py): it gets
COMPLETE's arguments as the procedure's session sends them (the model, the conversation array, the options),
reads the conversation as the prompted tool protocol writes it (`llm.providers.tool_wire`: the tools and the
reply form in the system turn, each tool call an assistant turn holding {"tool_calls": [...]}, each result a user
turn "[tool result: NAME]"), hands the same spec, question and tool results to `DataAgentModel` that the
OpenAI-compatible endpoint hands it, and answers in COMPLETE's documented JSON (`choices[0].messages`, `usage`),
its reply in the protocol's form. So the model follows the spec it is given, and nothing else, on both paths.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from snowflake.snowpark.mock import ColumnEmulator, ColumnType, patch
from snowflake.snowpark.mock._functions import MockedFunctionRegistry  # no public unregister
from snowflake.snowpark.types import StringType

from coco_sql.llm.providers.base import estimate_tokens
from coco_sql.llm.providers.cortex import COMPLETE_FUNCTION
from tests.agent_model import DataAgentModel

TOOLS_HEADER = "You can call these tools (parameters are JSON Schema):"
RESULT = re.compile(r"\[tool result: (?P<name>[^\]]*)\]\n(?P<content>.*)", re.DOTALL)
MODEL = "mistral-large2"  # the Cortex model the tests' small packs name (`dabstep_agent.small_dabstep`)


class Killed(BaseException):
    """The procedure dies here (as a process does when it is killed): nothing catches it on the way out."""


@dataclass
class CortexDataAgent:
    """`DataAgentModel` behind COMPLETE. `calls` counts COMPLETE's rows answered, `models` the models asked,
    `tokens` (prompt, completion) per call; `kill_at`: the call that raises `Killed` instead of answering."""

    model: DataAgentModel = field(default_factory=DataAgentModel)
    calls: int = 0
    models: set[str] = field(default_factory=set)
    tokens: list[tuple[int, int]] = field(default_factory=list)
    kill_at: int | None = None

    def complete(self, model: str, history: list[dict[str, str]], options: dict[str, Any]) -> str:
        self.calls += 1
        if self.kill_at is not None and self.calls == self.kill_at:
            raise Killed(f"killed at COMPLETE call {self.calls}")
        self.models.add(model)
        messages, tools = neutral(history)
        turn = self.model(messages, tools)
        if turn.tool_calls:
            calls = [{"name": name, "arguments": arguments} for name, arguments in turn.tool_calls]
            reply = json.dumps({**({"content": turn.text} if turn.text else {}), "tool_calls": calls})
        else:
            reply = turn.text
        prompt = sum(estimate_tokens(t["content"]) for t in history)
        completion = estimate_tokens(reply)
        self.tokens.append((prompt, completion))
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        return json.dumps({"choices": [{"messages": reply}], "created": 0, "model": model, "usage": usage})


def neutral(history: Sequence[dict[str, str]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """COMPLETE's conversation as `DataAgentModel` reads an OpenAI-compatible request: the system text without
    the protocol's instruction, the tools offered ({name, description, parameters}), tool calls and results as
    their own turns."""
    messages: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    for turn in history:
        role, content = turn["role"], turn["content"]
        if role == "system" and TOOLS_HEADER in content:
            content, _, protocol = content.partition(f"\n\n{TOOLS_HEADER}\n")
            tools = json.loads(protocol.splitlines()[0])
        found = RESULT.match(content) if role == "user" else None
        if found:
            messages.append({"role": "tool", "tool_call_id": found["name"], "content": found["content"]})
        elif role == "assistant" and '"tool_calls"' in content:
            calls = json.loads(content)["tool_calls"]
            messages.append({"role": "assistant", "content": "",
                             "tool_calls": [(f"call_{i}", c["name"], json.dumps(c["arguments"]))
                                            for i, c in enumerate(calls)]})  # fmt: skip
        else:
            messages.append({"role": role, "content": content})
    return messages, tools


@contextlib.contextmanager
def cortex_agent(agent: CortexDataAgent | None = None) -> Iterator[CortexDataAgent]:
    """`agent` (default: a new one) patched in as COMPLETE for Snowpark's local testing mode; unregistered after
    the block (the registry is process-global)."""
    agent = agent or CortexDataAgent()

    @patch(COMPLETE_FUNCTION)
    def complete(model: ColumnEmulator, history: ColumnEmulator, options: ColumnEmulator) -> ColumnEmulator:
        answers = [agent.complete(*row) for row in zip(model, history, options, strict=True)]
        return ColumnEmulator(data=answers, sf_type=ColumnType(StringType(), True))

    try:
        yield agent
    finally:
        MockedFunctionRegistry.get_or_create().unregister(COMPLETE_FUNCTION)
