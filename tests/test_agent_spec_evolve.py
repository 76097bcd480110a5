"""Data agents in the evolution loop, end to end: the dabstep pack (``language = "agent_spec"``) evolved by the CLI and
`api.evolve` with the scripted data agent (tests/agent_model.py) behind a real local HTTP server, reached through
coco_sql's OpenAI-compatible client; every tool call runs in the real SQL sandbox and every row lands in real DuckDB.

The model answers a question right only when the spec carries the rule it needs, so a higher training score means
the offline operators put a rule into the spec (here: the manual's fee section, which solved runs read)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from coco_sql import api
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import CocoError, TaskError
from coco_sql.languages.agent_spec.export import check_documented, sqlglot_reading
from coco_sql.llm import AiConfig, EndpointConfig
from coco_sql.reflect.history import HistoryTools
from coco_sql.tasks import load_task
from tests import leakage_probe
from tests.agent_model import DataAgentModel
from tests.conftest import run_cli
from tests.dabstep_agent import MODEL, PACK
from tests.llm_double import FakeEndpoint
from tests.test_loop import snapshot

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "coco_sql.cli", *args]


def env_for(endpoint: FakeEndpoint) -> dict[str, str]:
    """The CLI's environment: the scripted model as the OpenAI-compatible endpoint `openai`."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OPENAI_BASE_URL": endpoint.base_url,
        "OPENAI_API_KEY": "test",
    }


# The completion model is not recorded with the run (as for every AI task): a resume names it again. The pack's
# [run] minibatch (8 sampled questions per iteration) is turned off: at budget 3 the scripted model's mutator needs
# every training question's trace to find the section a solved question read.
EVOLVE = (
    "--budget",
    "3",
    "--seed",
    "1",
    "--minibatch",
    "0",
    "--completion-model",
    "openai/data-agent",
    "--json",
)


def assert_no_run(db: Path) -> None:
    """Nothing written: no store, or one without a run (the store may be opened before the seed is checked)."""
    if db.exists():
        with duckdb.connect(str(db), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def train_scores(db: Path) -> dict[str, float]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT program_id, score FROM program_scores WHERE split = 'train'").fetchall()
    return dict(rows)


@dataclass(frozen=True)
class CliRun:
    """A whole run of the CLI (`EVOLVE`), which the tests only read, and the endpoint it used (still serving)."""

    endpoint: FakeEndpoint
    db: Path
    done: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliRun]:
    whole = tmp_path_factory.mktemp("cli") / "whole.duckdb"
    with FakeEndpoint(script=DataAgentModel(), full_tools=True) as endpoint:
        done = run_cli("evolve", PACK, "--db", whole, *EVOLVE, cwd=whole.parent, env=env_for(endpoint))
        yield CliRun(endpoint, whole, done)


@pytest.mark.slow
def test_the_cli_evolves_the_seed_spec_resumes_exactly_after_a_kill_and_exports_a_create_agent(
    tmp_path: Path, cli_run: CliRun
) -> None:
    whole, killed, done, endpoint = cli_run.db, tmp_path / "killed.duckdb", cli_run.done, cli_run.endpoint
    env = env_for(endpoint)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    scores = train_scores(whole)
    # the seed states no rule; the champion carries the manual's fee section, which solved runs read
    assert summary["champion_id"] != "1-0"
    assert scores[summary["champion_id"]] > scores["1-0"]
    assert summary["champion_val_score"] > summary["seed_val_score"]

    # a process of its own: it is killed
    process = subprocess.Popen(cli("evolve", str(PACK), "--db", str(killed), *EVOLVE), env=env,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert process.stderr is not None
    for line in process.stderr:  # iteration 1 is committed, iteration 2 in flight
        if line.startswith("[  1/3]"):
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    resumed = run_cli("evolve", PACK, "--db", killed, "--resume", *EVOLVE[-3:], cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert snapshot(killed) == snapshot(whole)  # programs, every row with its trace, archive, ledger
    assert resumed.stdout.splitlines()[-1] == done.stdout.splitlines()[-1]

    exported = run_cli("export", "--db", whole, "--form", "cortex_agent", cwd=tmp_path, env=env)
    assert exported.returncode == 0, exported.stderr
    script = exported.stdout
    statements = [s.strip() for s in script.split(";\n\n") if s.strip()]
    agent = statements[-1]
    assert agent.startswith("CREATE OR REPLACE AGENT COCO.AGENTS.coco_dabstep_champion")
    body = agent.split("FROM SPECIFICATION\n$$\n", 1)[1].rsplit("$$", 1)[0]
    document = yaml.safe_load(body)
    check_documented(document)  # every key is one Snowflake documents
    assert (
        "Understanding Payment Processing Fees" in document["instructions"]["system"]
    )  # what the search added
    for statement in statements:
        assert not sqlglot_reading(statement).startswith("error"), statement


@pytest.mark.slow  # the module's budget-3 run takes ~50 s
def test_each_row_keeps_its_trace_and_the_history_tools_read_it(cli_run: CliRun) -> None:
    db = cli_run.db
    assert cli_run.done.returncode == 0, cli_run.done.stderr
    task = load_task(PACK)
    train = sorted(task.split("train").expected)
    with DuckDBStore(db, read_only=True) as store:
        tools = HistoryTools(store, 1)
        rows = [tools.call("get_row_trace", program_id="1-0", instance_id=i) for i in train]
        with pytest.raises(Exception, match="no training instance"):
            tools.get_row_trace("1-0", min(task.split("val").expected))
    traces = [row["observation"]["trace"] for row in rows]
    assert all(t["question_id"] == row["instance_id"] for t, row in zip(traces, rows, strict=True))
    solved = [t for t, row in zip(traces, rows, strict=True) if row["score"] == 1.0]
    assert solved and all(any("sql" in step for step in t["steps"]) for t in solved)
    assert all(
        t["answer"] == json.loads(row["output"]) for t, row in zip(traces, rows, strict=True) if row["output"]
    )


def _planted_pack(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the pack whose validation and test answers end in unique markers."""
    root = tmp_path / "dabstep"
    shutil.copytree(PACK, root)
    task = load_task(PACK)
    held_out = sorted(task.split("val").expected) + sorted(task.split("test").expected)
    path = root / "data" / "questions.csv"
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        columns, rows = reader.fieldnames, list(reader)
    markers = {i: leakage_probe.marker(i) for i in held_out}
    for row in rows:
        if row["id"] in markers:
            row["answer"] = f"{row['answer']} {markers[row['id']]}"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)  # type: ignore[arg-type]
        writer.writeheader()
        writer.writerows(rows)
    return root, markers


@pytest.mark.slow
def test_leakage_probe_nothing_the_search_shows_holds_a_held_out_answer(tmp_path: Path) -> None:
    root, markers = _planted_pack(tmp_path)
    shown: list[str] = []

    class Watching(DataAgentModel):  # every request the model gets: the spec, questions, tool results
        def __call__(self, messages: list[dict[str, Any]], tools: list[Any]) -> Any:
            shown.append(json.dumps([messages, tools]))
            return super().__call__(messages, tools)

    db = tmp_path / "runs.duckdb"
    with FakeEndpoint(script=Watching(), full_tools=True) as endpoint:
        ai = AiConfig(endpoints={"fake": EndpointConfig("openai", endpoint.base_url)}, completion_model=MODEL)
        summary = api.evolve(root, db=db, budget=2, options={"seed": 1}, ai=ai)
    with DuckDBStore(db, read_only=True) as store:  # every history tool over the run (`mutator_view`)
        shown += leakage_probe.mutator_view(store, summary.run_id)
    with duckdb.connect(str(db), read_only=True) as con:
        # everything stored, but the expected answers themselves: programs, approaches, events, ledger, traces,
        # outputs and the response cache (every request and answer)
        for table in ("programs", "events", "ledger", "ai_cache", "program_scores"):
            shown += [str(r) for r in con.execute(f"SELECT * FROM {table}").fetchall()]
        shown += [
            str(r)
            for r in con.execute("SELECT instance_id, output, error, observation FROM evaluations").fetchall()
        ]
        planted = con.execute("SELECT COUNT(*) FROM evaluations WHERE expected LIKE '%LEAK%'").fetchone()[0]
    assert planted > 0  # the markers are in the run: the probe looks where they could leak from
    assert leakage_probe.found(shown, markers) == []
    assert leakage_probe.found([*shown, f"answer {markers[min(markers)]}"], markers) == [min(markers)]


RESOURCES = "tool_resources:\n  run_sql:\n    type: procedure\n"
BAD_SEEDS = {
    "a tool that writes": (
        RESOURCES,
        f"{RESOURCES}    sql: DELETE FROM fees WHERE id = :sql\n",
        "DELETE|read",
    ),
    "a table the task lacks": (
        "    - documents\n",
        "    - documents\n    - payments\n",
        "'payments' is not a table",
    ),
    "malformed YAML": ("tools:\n", "tools: [\n", "YAML|JSON"),
}
BAD_TABLES = {
    "a missing file": (
        'fees = "data/fees.csv"',
        'fees = "data/missing.csv"',
        "'data/missing.csv' is not a file",
    ),
    "an unknown key": ("[agent_spec]\n", '[agent_spec]\ncolour = "red"\n', "unknown key 'colour'"),
    "a limit out of range": ("max_turns = 10", "max_turns = 0", "max_turns: must be an integer"),
    "another kind's table": (
        "[source]",
        "[python]\nx = 1\n\n[source]",
        "only a task with language = 'python'",
    ),
}


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [("seed.yaml", *v) for v in BAD_SEEDS.values()] + [("task.toml", *v) for v in BAD_TABLES.values()],
    ids=[*BAD_SEEDS, *BAD_TABLES],
)
def test_bad_input_is_one_line_and_writes_nothing(
    tmp_path: Path, file: str, old: str, new: str, message: str
) -> None:
    root = tmp_path / "dabstep"
    shutil.copytree(PACK, root)
    text = (root / file).read_text()
    if old == RESOURCES:  # the free tool's table list becomes a query of a tool with one parameter
        text = text[: text.index(RESOURCES) + len(RESOURCES)]
    assert text.count(old) == 1
    (root / file).write_text(text.replace(old, new))
    db = tmp_path / "runs.duckdb"
    with pytest.raises(CocoError, match=message) as error:
        api.evolve(root, db=db, budget=1, ai=AiConfig(completion_model="smollm2"))
    assert "\n" not in str(error.value)
    assert_no_run(db)


def test_a_question_row_without_an_answer_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "dabstep"
    shutil.copytree(PACK, root)
    path = root / "data" / "questions.csv"
    lines = path.read_text().splitlines()
    header, first = lines[0], next(csv.reader([lines[1]]))
    first[header.split(",").index("answer")] = ""
    path.write_text(
        "\n".join([header, ",".join(json.dumps(v) if "," in v else v for v in first), *lines[2:]]) + "\n"
    )
    db = tmp_path / "runs.duckdb"
    with pytest.raises(TaskError) as error:
        api.evolve(root, db=db, budget=1, ai=AiConfig(completion_model="smollm2"))
    assert "\n" not in str(error.value) and "answer" in str(error.value)
    assert_no_run(db)
