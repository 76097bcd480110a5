"""The coding agent evolving a data agent: for a kind whose runs leave a trace per row (`KindPlugin.row_traces`), the
history tool `get_row_trace` is offered, and a scripted coder reads a failed question's trace (the manual section
the run queried), writes the rules it finds there into the spec, tests the draft and commits it. The spec runs with
the scripted data agent (tests/agent_model.py); both models sit behind real local HTTP servers reached through
coco_sql's OpenAI-compatible client, on a nine-question copy of the dabstep pack."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
import yaml

from coco_sql import api
from coco_sql.agent.toolbox import Toolbox
from coco_sql.agent.workspace import Workspace
from coco_sql.evaluate import Evaluator
from coco_sql.llm import AiConfig, EndpointConfig
from coco_sql.mutate.base import MutationRequest, ProgramView
from coco_sql.plugins import kind
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.reflect.history import HistoryTools
from coco_sql.tasks import load_task
from tests.agent_model import DataAgentModel
from tests.dabstep_agent import small_dabstep
from tests.llm_double import FakeEndpoint, Turn

#: What the coder copies out of a trace: the manual's sentences with the fee formula and the null rule.
RULES = (
    re.compile(r"The fee then is provided by `fee = fixed_amount \+ rate \* transaction_value / 10000`\."),
    re.compile(r"If a field is set to null it means that it applies to all possible values of that field\."),
)
shown: list[list[str]] = []  # the tools each coder request offered


def coder(conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
    """Find the worst training row, read its trace, put the rules its run read into the instructions, test,
    commit."""
    shown.append(tools)
    results = [turn["content"] for turn in conversation if turn["role"] == "tool"]
    step = len(results)
    if step == 0:
        return Turn("Which rows fail?", (("get_suggested_questions", {"program_id": "1-0", "n": 3}),))
    if step == 1:
        worst = json.loads(results[0])[0]["instance_id"]
        return Turn("What did its run do?", (("get_row_trace", {"program_id": "1-0", "instance_id": worst}),))
    if step == 2:
        return Turn("", (("read_candidate", {}),))
    if step == 3:
        trace = json.loads(results[1])["observation"]["trace"]
        read = " ".join(str(cell) for step in trace["steps"] for row in step.get("rows", []) for cell in row)
        rules = " ".join(found.group(0) for pattern in RULES if (found := pattern.search(read)))
        spec = yaml.safe_load(results[2])
        spec["instructions"]["system"] += f"\n\nRules from the manual: {rules}"
        return Turn("Write the rules in.", (("write_candidate", {"code": yaml.safe_dump(spec)}),))
    if step == 4:
        return Turn("", (("test_draft", {}),))
    return Turn(
        "", (("commit", {"approach": "hillclimb", "description": "the manual's fee rules, from a trace"}),)
    )


@pytest.mark.slow
def test_the_coding_agent_reads_a_failed_questions_trace_and_writes_its_rules_into_the_spec(
    tmp_path: Path,
) -> None:
    pack = small_dabstep(tmp_path)
    db = tmp_path / "runs.duckdb"
    shown.clear()
    with (
        FakeEndpoint(script=DataAgentModel(), full_tools=True) as agent,
        FakeEndpoint(script=coder) as coding,
    ):
        ai = AiConfig(
            endpoints={"fake": EndpointConfig("openai", agent.base_url),
                       "coder": EndpointConfig("openai", coding.base_url)},
            completion_model="fake/data-agent",
        )  # fmt: skip
        options = {"seed": 1, "mutator": "agent", "mutator_settings": {"model": "coder/scripted"}}
        summary = api.evolve(pack, db=db, budget=1, options=options, ai=ai)
    with duckdb.connect(str(db), read_only=True) as con:
        train = dict(
            con.execute("SELECT program_id, score FROM program_scores WHERE split = 'train'").fetchall()
        )
        (code,) = con.execute("SELECT code FROM programs WHERE program_id = '1-1'").fetchone()
        tools = [r[0] for r in con.execute(
            "SELECT tool_name FROM agent_turns WHERE role = 'tool' ORDER BY turn").fetchall()]  # fmt: skip
    assert summary.iterations == 1 and all("get_row_trace" in offered for offered in shown)
    assert tools == ["get_suggested_questions", "get_row_trace", "read_candidate", "write_candidate", "test_draft",
                     "commit"]  # fmt: skip
    system = " ".join(yaml.safe_load(code)["instructions"]["system"].split())
    assert all(pattern.search(system) for pattern in RULES)  # both rules came out of the trace
    assert train["1-1"] > train["1-0"]


def test_get_row_trace_is_offered_only_for_kinds_whose_runs_leave_traces(tmp_path: Path) -> None:
    """A SQL task's agent is offered the same tools as before: its cached requests stay valid."""
    names = {}
    for task in (load_task("lockpicking6"), load_task(small_dabstep(tmp_path))):
        evaluator = Evaluator(task, ("train",))
        request = MutationRequest(1, ProgramView("1-0", task.seed_program, 0.0), DraftEnvironment(evaluator))
        box = Toolbox(request, Workspace(task.seed_program), np.random.default_rng(0), history=object(),  # specs only
                      row_traces=kind(task.language).row_traces)  # type: ignore[arg-type]  # fmt: skip
        names[task.language] = [spec.name for spec in box.specs]
        evaluator.close()
    assert "get_row_trace" in names["agent_spec"] and "get_row_trace" not in names["sql"]
    assert [n for n in names["agent_spec"] if n != "get_row_trace"] == names["sql"]
    assert set(names["sql"]) >= set(HistoryTools.TOOLS)
