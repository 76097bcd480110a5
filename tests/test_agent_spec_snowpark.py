"""A data agent evolved inside Snowflake: `CALL coco_evolve` on a small copy of the dabstep pack as a Snowflake
procedure runs it, in Snowpark's local testing mode under the strict emulation of a procedure's limits (no process,
no socket, writes under /tmp, the session from the calling thread only: `snowpark_helpers.strict_session`).

The spec's tools run as warehouse queries over the pack's tables staged in the session (local testing answers
them in its locked-down in-process DuckDB, `engines.snowflake.candidates.LocalQueries`), and every chat turn is one
``SNOWFLAKE.CORTEX.COMPLETE`` through the procedure's session, answered by the scripted data agent of
tests/agent_model.py (`agent_cortex.CortexDataAgent`): a question is answered right only when the spec carries
the rule it needs, so a higher training score means the search put a rule into the spec.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')")
from snowflake.snowpark import Session
from snowflake.snowpark.mock.exceptions import SnowparkLocalTestingException
from snowpark_helpers import plain, procedure_session, strict_session

import coco_sql
from coco_sql.engines.snowflake.candidates import WarehouseCandidates
from coco_sql.engines.snowflake.store import SnowparkStore
from coco_sql.engines.snowflake.strict import strict_procedures
from coco_sql.errors import EvaluationError
from coco_sql.languages import language_for
from coco_sql.languages.agent_spec.spec import Parameter, Tool, parse
from coco_sql.languages.agent_spec.tools import ToolBox
from coco_sql.languages.agent_spec.toolsql import CheckedQuery
from coco_sql.languages.agent_spec.warehouse import WarehouseToolQueries
from coco_sql.llm.providers.base import ToolCall
from coco_sql.llm.routing import AiConfig
from coco_sql.llm.runtime import AiRuntime
from coco_sql.plugin_loader import local_functions
from coco_sql.tasks import load_task
from tests.agent_cortex import MODEL, Killed, cortex_agent
from tests.agent_model import DataAgentModel
from tests.dabstep_agent import PACK, SMALL, pack_tables, questions, small_dabstep
from tests.llm_double import FakeEndpoint

COMPARED = {
    "programs": ["program_id", "parent_id", "code", "approach", "valid"],
    "evaluations": ["program_id", "split", "instance_id", "score", "output", "error"],
    "program_scores": ["program_id", "split", "score"],
    "archive_entries": ["iteration", "seq", "island", "cell", "program_id", "reason"],
    "ledger": ["iteration", "program_id", "strategy", "status", "parent_score", "child_score", "note"],
}


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs start in `tmp_path`, whose ./tasks holds the small pack (found there by name, also on resume)."""
    monkeypatch.chdir(tmp_path)


def rows(frame: pd.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(plain(v) for v in row) for row in frame[columns].itertuples(index=False, name=None))


def tables(session: Session) -> dict[str, list[tuple[Any, ...]]]:
    store = SnowparkStore(session, read_only=True)
    return {table: rows(store.table_frame(table), columns) for table, columns in COMPARED.items()}


def train_scores(session: Session) -> dict[str, float]:
    scores = SnowparkStore(session, read_only=True).table_frame("program_scores")
    return {r.program_id: float(r.score) for r in scores[scores["split"] == "train"].itertuples()}


@pytest.mark.slow
def test_the_training_score_rises_through_call_coco_evolve_inside_a_procedure(tmp_path: Path) -> None:
    small_dabstep(tmp_path, model=f"cortex:{MODEL}")
    with cortex_agent() as agent, strict_session() as (session, limits):
        (summary,) = session.call("coco_evolve", SMALL, 1, {"seed": 1}).collect()
        store = SnowparkStore(session, read_only=True)
        scores = train_scores(session)
        evaluations = store.table_frame("evaluations")
        usage = store.table_frame("ai_usage")
        cached = len(store.table_frame("ai_cache"))
        codes = dict(store.table_frame("programs")[["program_id", "code"]].itertuples(index=False))
        assert limits.calls == 1 and summary["ITERATIONS"] == 1
    # the seed states no rule; the search added the manual's fee section, which the seed's solved run read
    assert scores["1-0"] < scores["1-1"] and "5. Understanding Payment Processing Fees" in codes["1-1"]
    assert agent.models == {MODEL}  # every turn went to Cortex COMPLETE, with the pack's model
    assert cached == agent.calls  # each request asked once, and kept: what a resume replays
    traces = [json.loads(o)["trace"] for o in evaluations["observation"].dropna()]
    steps = [step for trace in traces for step in trace["steps"]]
    assert steps and all("error" not in step and step["row_count"] > 0 for step in steps if "sql" in step)
    assert any(step["rows"][0][0] == "manual#7" for step in steps)  # the documents table, staged too
    assert set(usage["model"]) == {f"cortex:{MODEL}"} and set(usage["function"]) == {
        "data_agent",
        "data_agent_smoke",
    }
    assert (usage["calls"] - usage["cache_hits"]).sum() == agent.calls


@pytest.mark.slow
def test_the_same_run_in_a_procedure_and_through_call_coco_evolve_in_duckdb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same programs, answers and scores: the scripted model behind Cortex COMPLETE (prompted tools) and behind
    an OpenAI-compatible endpoint (native tools), the tools as warehouse queries and in the SQL sandbox."""
    small_dabstep(tmp_path, model=f"cortex:{MODEL}")
    with cortex_agent(), strict_session() as (session, _):
        session.call("coco_evolve", SMALL, 2, {"seed": 1}).collect()
        warehouse = tables(session)
    with FakeEndpoint(script=DataAgentModel(), full_tools=True) as endpoint:
        monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        con = coco_sql.connect(tmp_path / "local.duckdb")
        try:
            con.execute(
                f"CALL coco_evolve('{SMALL}', 2, {{'seed': 1, 'completion_model': 'openai/data-agent'}})"
            )
            local = {
                table: sorted(tuple(plain(v) for v in row) for row in
                              con.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall())
                for table, columns in COMPARED.items()
            }  # fmt: skip
        finally:
            con.close()
    assert warehouse == local
    assert len({row[0] for row in local["programs"]}) == 3


@pytest.mark.slow
def test_a_procedure_killed_mid_iteration_resumes_exactly(tmp_path: Path) -> None:
    """Killed during iteration 2's Cortex turns, then `CALL coco_resume`: the tables hold what the whole run holds,
    and the resumed run asks COMPLETE only what the dead iteration had not committed (every committed turn is
    answered from the response cache)."""
    small_dabstep(tmp_path, model=f"cortex:{MODEL}")
    with cortex_agent() as whole_agent, strict_session() as (session, _):
        session.call("coco_evolve", SMALL, 3, {"seed": 1}).collect()
        whole = tables(session)
        usage = SnowparkStore(session, read_only=True).table_frame("ai_usage")
    asked = usage["calls"] - usage["cache_hits"]
    first = int(asked[usage["iteration"] <= 1].sum())  # COMPLETE calls of iterations 0 and 1
    with cortex_agent() as agent, strict_session() as (session, limits):
        agent.kill_at = first + 5  # a few turns into iteration 2
        with pytest.raises(Killed):
            session.call("coco_evolve", SMALL, 3, {"seed": 1})
        committed = len(SnowparkStore(session, read_only=True).table_frame("ai_cache"))
        before, agent.kill_at = agent.calls, None
        (resumed,) = session.call("coco_resume", 1).collect()
        assert resumed["ITERATIONS"] == 3 and limits.calls == 2
        assert tables(session) == whole
    assert committed == first  # iterations 0 and 1 committed their turns, the dead one none
    assert agent.calls - before == whole_agent.calls - committed


def test_without_a_cortex_model_a_procedure_says_so_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    small_dabstep(tmp_path, model=None)  # the pack's own model: the embedded smollm2
    session = procedure_session()
    try:
        with (
            cortex_agent() as agent,
            strict_procedures(session) as limits,
            pytest.raises(SnowparkLocalTestingException) as raised,
        ):
            session.call("coco_evolve", SMALL, 2, {"seed": 1})
        store = SnowparkStore(session, read_only=True)
        assert store.table_frame("runs").empty and store.table_frame("programs").empty
    finally:
        session.close()
    limits.check()
    message = str(raised.value.__cause__ or raised.value)
    assert "inside Snowflake a data agent's model is Cortex COMPLETE, and 'smollm2' is not one" in message
    assert "\n" not in message.strip() and agent.calls == 0


# -- the tools as warehouse queries, outside a procedure -----------------------------------------------------------
SEED = parse((PACK / "seed.yaml").read_text())
SCHEME_FEE = Tool(
    "scheme_fee", "Mean fee of a scheme's rules at a transaction value.",
    (Parameter("scheme", "string"), Parameter("value", "number")),
    sql="SELECT AVG(fixed_amount + rate * :value / 10000) AS fee FROM fees WHERE card_scheme = :scheme",
)  # fmt: skip
CALLS = [
    ToolCall("a", "scheme_fee", {"scheme": "GlobalCard", "value": 10}, ""),
    ToolCall("b", "run_sql", {"sql": "SELECT COUNT(*) AS n FROM fees WHERE is_credit IS NULL"}, ""),
    ToolCall("c", "run_sql", {"sql": 'WITH fees AS (SELECT 1 AS "id") SELECT "id" AS n FROM fees'}, ""),
    ToolCall("d", "run_sql", {"sql": "SELECT f.id, COUNT(t.mcc) AS mccs FROM fees f LEFT JOIN fee_mccs t "
                                     "ON t.fee_id = f.id GROUP BY f.id ORDER BY mccs DESC, f.id LIMIT 3"}, ""),
    ToolCall("e", "run_sql", {"sql": "SELECT section FROM documents WHERE title ILIKE '%fees%' ORDER BY 1"}, ""),
    ToolCall("f", "run_sql", {"sql": "SELECT COUNT(*) AS n FROM runs"}, ""),  # refused by the checks
]  # fmt: skip


class CountingCandidates(WarehouseCandidates):
    """The warehouse engine, counting what it stages and drops."""

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self.staged: list[str] = []
        self.dropped: list[str] = []

    def stage_rows(self, split: str, rows: pd.DataFrame) -> str:
        self.staged.append(split)
        return super().stage_rows(split, rows)

    def drop_staged(self, name: str) -> None:
        self.dropped.append(name)
        super().drop_staged(name)


@pytest.fixture
def local_session() -> Iterator[Session]:
    session = Session.builder.config("local_testing", True).create()
    yield session
    session.close()


def test_tool_calls_answer_in_the_warehouse_what_they_answer_in_the_sandbox(local_session: Session) -> None:
    tables = pack_tables()
    spec = replace(SEED, tools=(*SEED.tools, SCHEME_FEE))
    engine = CountingCandidates(local_session)
    queries = WarehouseToolQueries(engine, tables.rows, "snowflake").acquire()
    with ToolBox(spec, tables.rows, tables.schemas) as local, \
            ToolBox(spec, tables.rows, tables.schemas, queries=queries) as warehouse:  # fmt: skip
        answers = [(local.call(c).text, warehouse.call(c).text) for c in CALLS]
    assert [w for _, w in answers] == [s for s, _ in answers]
    assert json.loads(answers[1][1])["rows"] == [[100]] and "refused" in answers[5][1]  # nulls staged as NULL
    assert sorted(engine.staged) == [
        "agent_documents",
        "agent_fee_mccs",
        "agent_fees",
    ]  # once each, when read
    assert queries.queries == 5 and not engine.dropped  # the toolbox does not own the staged tables
    queries.acquire()
    queries.release()
    assert not engine.dropped  # one runner still holds them
    queries.release()
    assert len(engine.dropped) == 3


def test_a_query_reads_only_the_staged_copies_of_its_tables(local_session: Session) -> None:
    engine = CountingCandidates(local_session)
    queries = WarehouseToolQueries(engine, pack_tables().rows, "duckdb")
    sql = queries.warehouse_sql(
        "WITH fees AS (SELECT * FROM fees f WHERE \"card_scheme\" = 'GlobalCard') SELECT COUNT(*) FROM fees",
        ("fees",),
    )
    (staged,) = {name for name in sql.split() if name.startswith("COCO_INPUT_AGENT_FEES_")}
    assert sql == (f"WITH fees AS (SELECT * FROM {staged} AS f WHERE card_scheme = 'GlobalCard') "
                   "SELECT COUNT(*) FROM fees")  # fmt: skip
    for source in ("SELECT * FROM merchants", "SELECT * FROM other.fees", "SELECT * FROM runs"):
        with pytest.raises(EvaluationError, match=r"the tool may read only fees, not"):
            queries.warehouse_sql(source, ("fees",))
    checked = CheckedQuery("SELECT fees.nope FROM fees", "", frozenset({"fees"}))  # past no check: it fails
    with pytest.raises(EvaluationError) as failed:
        queries.run(checked, ("fees",), 10.0)
    assert "COCO_INPUT" not in str(failed.value).upper() and "fees" in str(failed.value)
    queries.close()


def test_the_mutators_probes_read_the_splits_questions_in_the_warehouse(
    local_session: Session, tmp_path: Path
) -> None:
    """A runner bound to the warehouse serves the evaluator's probes itself (the coding agent's `query` tool):
    its questions staged on the first probe, dropped when it closes; nothing else is readable."""
    task = load_task(small_dabstep(tmp_path, model=f"cortex:{MODEL}"))
    engine = CountingCandidates(local_session)
    language = language_for(task, engine)
    ai = AiConfig(snowpark_session=local_session, completion_endpoint="cortex")
    runner = language.runner(task.split("train"), local_functions(AiRuntime(ai)))
    probes = runner.probe_sandbox
    assert probes.statement_types("SELECT 1") == ["SELECT"] and engine.staged == []
    found = probes.run("SELECT id FROM input WHERE question ILIKE '%credit%' ORDER BY id", 10.0)
    assert [row[0] for row in found.rows] == [q.id for q in questions() if q.id in set(task.split("train").expected)
                                              and q.extra["template"] == "credit_average_fee"]  # fmt: skip
    with pytest.raises(EvaluationError, match="may read only input"):
        probes.run("SELECT * FROM fees", 10.0)
    assert engine.staged == ["train"]
    runner.close()
    assert len(engine.dropped) == 1
