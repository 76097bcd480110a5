"""The scripted data agent (tests/agent_model.py) as Cortex COMPLETE, for data agents run inside a Snowflake procedure
in Snowpark's local testing mode, and a small copy of the dabstep pack for those runs.

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
import csv
import json
import re
import shutil
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snowflake.snowpark.mock import ColumnEmulator, ColumnType, patch
from snowflake.snowpark.mock._functions import MockedFunctionRegistry  # no public unregister
from snowflake.snowpark.types import StringType

from coco_sql.llm.providers.base import estimate_tokens
from coco_sql.llm.providers.cortex import COMPLETE_FUNCTION
from coco_sql.tasks.splits import partition_ids
from tests.agent_model import DataAgentModel
from tests.dabstep_agent import PACK, questions

TOOLS_HEADER = "You can call these tools (parameters are JSON Schema):"
RESULT = re.compile(r"\[tool result: (?P<name>[^\]]*)\]\n(?P<content>.*)", re.DOTALL)
MODEL = "mistral-large2"  # the Cortex model the small pack names


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


# -- a small dabstep pack --------------------------------------------------------------------------------------
#: Training questions, by template: the seed answers the scheme ranking (its query reads the manual's fee
#: section); the credit fee needs that section's rules; the account fee needs a rule no document states.
TRAIN = ("average_scenario_scheme", "credit_average_fee", "account_average_fee")
HELD_OUT = ("credit_average_fee", "average_scenario_scheme", "fee_ids_for_account_aci")


SMALL = "dabstep_small"  # the copy's task name: a procedure's coco_resume finds the pack by it (in ./tasks)


def small_dabstep(root: Path, model: str | None = f"cortex:{MODEL}", max_drafts: int = 3) -> Path:
    """A copy of the dabstep pack named `SMALL` in `root`/tasks (where a run from `root` finds it by name) with nine
    questions (three per split: the training ones of `TRAIN`, held-out ones of `HELD_OUT`), the split seed chosen
    so that `TRAIN` is the training split, its ``[agent_spec] model`` set to `model` (None: the pack's) and at most
    `max_drafts` drafts per iteration."""
    pack = root / "tasks" / SMALL
    shutil.copytree(PACK, pack)
    rows = questions()
    by_id = {q.id: q for q in rows}
    picked: list[str] = []
    for templates in (TRAIN, HELD_OUT, HELD_OUT):
        for template in templates:
            picked.append(next(q.id for q in sorted(rows, key=lambda q: int(q.id))
                                if q.extra["template"] == template and q.id not in picked))  # fmt: skip
    config = tomllib.loads((PACK / "task.toml").read_text())
    s = config["splits"]
    seed = next(k for k in range(10_000)
                if partition_ids(picked, k, s["train_fraction"], s["test_fraction"])["train"] == sorted(picked[:3]))  # fmt: skip
    with (PACK / "data" / "questions.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        columns, kept = reader.fieldnames, [row for row in reader if row["id"] in set(picked)]
    with (pack / "data" / "questions.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)  # type: ignore[arg-type]
        writer.writeheader()
        writer.writerows(kept)
    text = (pack / "task.toml").read_text().replace('name = "dabstep"', f'name = "{SMALL}"', 1)
    text = text.replace(f"seed = {s['seed']}\n", f"seed = {seed}\n", 1)
    text = re.sub(r"^max_drafts = \d+", f"max_drafts = {max_drafts}", text, count=1, flags=re.MULTILINE)
    if model is not None:
        text = re.sub(r'^model = "[^"]*"', f'model = "{model}"', text, count=1, flags=re.MULTILINE)
    (pack / "task.toml").write_text(text)
    assert len(kept) == 9 and all(by_id[i].extra["template"] for i in picked)
    return pack
