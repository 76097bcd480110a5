"""Data agents offline, honestly (issue 40): a smoke question stops a run whose model calls no tool, before it spends
its time, in one line that says what to configure; each question is reported as it goes; and `coco-sql
demo-agent-server` serves the scripted data agent over the real OpenAI wire format, so a run reaches it through
coco-sql's real client and improves the spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from coco_sql import api
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import ConfigError
from coco_sql.llm import AiConfig, EndpointConfig
from coco_sql.llm.routing import local_completion_missing
from tests.conftest import run_cli
from tests.dabstep_agent import SMALL, small_dabstep
from tests.llm_double import FakeEndpoint, Turn

MODEL = "fake/data-agent"


def chatty(messages: list[dict], tools: list) -> Turn:
    """A model that answers every question in prose and never calls a tool (as SmolLM2-135M does)."""
    return Turn("The answer is 10 EUR rounded to 6 decimals.")


def test_a_model_that_calls_no_tool_stops_the_run_in_one_line_before_any_question(tmp_path: Path) -> None:
    pack = small_dabstep(tmp_path)
    db = tmp_path / "runs.duckdb"
    with FakeEndpoint(script=chatty, full_tools=True) as endpoint:
        ai = AiConfig(endpoints={"fake": EndpointConfig("openai", endpoint.base_url)}, completion_model=MODEL)
        started = time.monotonic()
        with pytest.raises(ConfigError) as raised:
            api.evolve(pack, db=db, budget=2, options={"seed": 1}, ai=ai)
        asked = len(endpoint.requests)
    message = str(raised.value)
    assert "\n" not in message and time.monotonic() - started < 60
    assert f"model {MODEL!r} answered a smoke question without calling the tool" in message
    assert "--completion-model" in message and "coco-sql demo-agent-server" in message
    assert asked == 1  # the smoke question, and not one of the pack's questions
    with DuckDBStore(db, read_only=True) as store:
        assert store.query("SELECT count(*) AS n FROM runs").n[0] == 0  # nothing written


def test_each_question_is_reported_as_it_goes(tmp_path: Path) -> None:
    from tests.agent_model import DataAgentModel

    pack = small_dabstep(tmp_path)
    seen: list[tuple[str, int, int]] = []
    with FakeEndpoint(script=DataAgentModel(), full_tools=True) as endpoint:
        ai = AiConfig(endpoints={"fake": EndpointConfig("openai", endpoint.base_url)}, completion_model=MODEL,
                      progress=lambda what, done, total: seen.append((what, done, total)))  # fmt: skip
        result = api.evaluate(pack, (pack / "seed.yaml").read_text(), "train", ai=ai)
    assert result.error is None and result.rows == 3
    assert [s for s in seen if s[0] == "train questions"] == [("train questions", i, 3) for i in range(4)]


def _serve(tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen([sys.executable, "-m", "coco_sql.cli", "demo-agent-server", "--port", "0"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert server.stdout is not None
    first = server.stdout.readline()
    assert "a script, not a language model" in first, first + server.stderr.read() if server.poll() else first
    return server, first.split(" at ")[1].strip()


def test_the_demo_server_is_the_scripted_agent_over_the_openai_wire_format(tmp_path: Path) -> None:
    small_dabstep(tmp_path)
    server, base_url = _serve(tmp_path)
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=30) as answer:
            models = json.loads(answer.read())
        assert (
            models["data"][0]["id"] == "scripted-data-agent" and "scripted" in models["data"][0]["owned_by"]
        )
        env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "demo"}
        db = tmp_path / "agent.duckdb"
        done = run_cli("evolve", SMALL, "--budget", "1", "--seed", "1", "--minibatch", "0", "--completion-model",
                       "openai/scripted-data-agent", "--db", db, "--json", cwd=tmp_path, env=env)  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    with DuckDBStore(db, read_only=True) as store:
        train = store.query("SELECT program_id, score FROM program_scores WHERE split = 'train'")
        usage = store.query("SELECT DISTINCT model FROM ai_usage WHERE function = 'data_agent'")
    scores = dict(zip(train.program_id, train.score, strict=True))
    assert scores[summary["best_id"]] > scores["1-0"]  # the spec took the manual's fee section (3 rows: the
    # champion rule, cheapest within one standard error, keeps the seed)
    assert list(usage.model) == ["openai/scripted-data-agent"]  # every turn went over HTTP to the server


@pytest.mark.slow
@pytest.mark.skipif(local_completion_missing() is not None, reason=f"{local_completion_missing()}")
def test_smollm2_stops_within_a_minute_saying_why(tmp_path: Path) -> None:
    small_dabstep(tmp_path)  # the pack's own model: the embedded SmolLM2 (llama.cpp)
    started = time.monotonic()
    done = run_cli(
        "evolve", SMALL, "--budget", "1", "--seed", "1", "--db", tmp_path / "s.duckdb", cwd=tmp_path
    )
    seconds = time.monotonic() - started
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "model 'smollm2' answered a smoke question without calling the tool" in lines[0]
    assert seconds < 60, seconds
