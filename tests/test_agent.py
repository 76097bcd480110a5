"""The coding-agent mutator, driven by a scripted chat model.

The model is the test double for a remote provider: `FakeEndpoint`, a real HTTP server on 127.0.0.1 that speaks the
OpenAI and the Anthropic wire formats, reached through coco-sql's real clients. Its script plays an agent: it
investigates with the history and data tools, adopts what `offline_search` finds, tests the draft and commits. The
runs are real (lockpicking6 on DuckDB); the transcripts must be in the tables and in `get_thinking_trace`, and each
failure mode must end in a discarded child with its reason, never in a crash.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from llm_double import FakeEndpoint, Fault, Turn

from coco_sql import api
from coco_sql.agent.conversation import Discard
from coco_sql.agent.toolbox import Toolbox
from coco_sql.agent.workspace import Workspace
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import ConfigError, ProviderUnavailable
from coco_sql.evaluate import Evaluator
from coco_sql.llm import AiConfig
from coco_sql.llm.providers.base import ProviderLimits, ToolCall
from coco_sql.llm.routing import EndpointConfig
from coco_sql.mutate import MutationRequest
from coco_sql.reflect import DraftEnvironment
from coco_sql.reflect.context import ProgramView
from coco_sql.reflect.history import HistoryTools
from coco_sql.tasks import load_task

Script = Callable[[list[dict[str, Any]], list[str]], Turn]
FAST = ProviderLimits(max_retries=1, timeout_s=5.0, backoff_s=0.05, max_backoff_s=0.1)


def ai_for(server: FakeEndpoint, wire: str = "openai") -> AiConfig:
    url = server.root_url if wire == "anthropic" else server.base_url
    return AiConfig(endpoints={"fake": EndpointConfig(wire, url, limits=FAST)})


def options(**agent: Any) -> dict[str, Any]:
    return {"seed": 1, "mutator": "agent", "mutator_settings": {"model": "fake/scripted", **agent}}


def tool_results(conversation: list[dict[str, Any]]) -> list[str]:
    return [turn["content"] for turn in conversation if turn["role"] == "tool"]


def assistant_turns(conversation: list[dict[str, Any]]) -> int:
    return sum(1 for turn in conversation if turn["role"] == "assistant")


def investigator(conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
    """A whole agentic mutation: investigate, take the offline operators' child, test it, commit."""
    step = assistant_turns(conversation)
    if step == 0:
        return Turn(
            "Which rows fail?",
            (("get_hard_questions", {"n": 3}), ("query", {"sql": "SELECT count(*) AS n FROM input"})),
        )
    if step == 1:
        return Turn("Let the exact operators search.", (("offline_search", {}),))
    if step == 2:
        found = json.loads(tool_results(conversation)[-1])
        return Turn("Adopt it.", (("write_candidate", {"code": found["code"]}),))
    if step == 3:
        return Turn("", (("test_draft", {}),))
    return Turn(
        "", (("commit", {"approach": "hillclimb", "description": "the offline search's best guard"}),)
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "agent.duckdb"


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_scripted_agent_drives_a_run_and_its_transcripts_are_in_the_tables(db: Path, wire: str) -> None:
    with FakeEndpoint(script=investigator) as server:
        summary = api.evolve("lockpicking6", db=db, budget=3, options=options(), ai=ai_for(server, wire))
    assert summary.iterations == 3 and summary.champion_val_score > summary.seed_val_score
    with duckdb.connect(str(db), read_only=True) as con:
        turns = con.execute(
            "SELECT iteration, agent, role, tool_name, template FROM agent_turns ORDER BY iteration, turn"
        ).fetchall()
        approaches = con.execute(
            "SELECT approach FROM programs WHERE iteration > 0 ORDER BY iteration"
        ).fetchall()
        spent = con.execute(
            "SELECT sum(input_tokens), sum(output_tokens) FROM ai_usage WHERE split = 'mutator'"
        ).fetchone()
    assert {t[0] for t in turns} == {1, 2, 3}
    first = [t for t in turns if t[0] == 1]
    assert [t[2] for t in first[:2]] == ["system", "user"] and first[0][4] == "agent_system@1"
    assert [t[3] for t in first if t[2] == "tool"] == [
        "get_hard_questions", "query", "offline_search", "write_candidate", "test_draft", "commit",
    ]  # fmt: skip
    assert approaches == [("the offline search's best guard",)] * 3
    assert spent[0] > 0 and spent[1] > 0
    with DuckDBStore(db, read_only=True) as store:
        trace = HistoryTools(store, summary.run_id).get_thinking_trace(2)
    assert json.dumps(trace).count("offline_search") >= 1
    cost = api.cost(summary.run_id, db=db)
    assert "mutator" in cost.phases


def test_resume_replays_the_cached_turns_of_an_interrupted_conversation(db: Path, tmp_path: Path) -> None:
    """The endpoint dies during iteration 2: the run stops with one line; resumed against a new endpoint, the
    turns answered before the failure come from the cache, and the run equals an uninterrupted one."""
    dying = FakeEndpoint(script=investigator)

    def dies_at_request_7(number: int) -> Fault:
        if number < 7:
            return Fault.OK
        if number == 7:  # the server goes away: this answer is cut off, and the retry finds nobody listening
            threading.Thread(target=dying.stop).start()
        return Fault.CLOSE

    dying.faults = dies_at_request_7
    with dying as server, pytest.raises(ProviderUnavailable, match="cannot connect"):
        api.evolve("lockpicking6", db=db, budget=2, options=options(), ai=ai_for(server))
    with FakeEndpoint(script=investigator) as server:
        api.resume(db=db, ai=ai_for(server))
        replayed = server.request_count
    assert replayed == 5 - 2  # iteration 1 was committed; iteration 2's first two turns came from the cache
    with FakeEndpoint(script=investigator) as server:
        api.evolve(
            "lockpicking6", db=tmp_path / "straight.duckdb", budget=2, options=options(), ai=ai_for(server)
        )
    query = "SELECT iteration, code, approach FROM programs ORDER BY iteration"
    with (
        duckdb.connect(str(db), read_only=True) as a,
        duckdb.connect(str(tmp_path / "straight.duckdb"), read_only=True) as b,
    ):
        assert a.execute(query).fetchall() == b.execute(query).fetchall()


def discarded(db: Path, script: Script, faults: Any = None, **agent: Any) -> list[tuple[Any, ...]]:
    """Run one agent iteration; the child programs' (valid, error)."""
    with FakeEndpoint(script=script, faults=faults) as server:
        api.evolve("lockpicking6", db=db, budget=1, options=options(**agent), ai=ai_for(server))
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT valid, error FROM programs WHERE iteration = 1").fetchall()


def test_a_model_that_never_calls_a_tool_is_discarded(db: Path) -> None:
    ((valid, error),) = discarded(db, lambda conversation, tools: Turn("I think the answer is 42."))
    assert not valid and error == "discarded: the model answered 2 times without calling a tool"


def test_unknown_tools_and_malformed_arguments_are_told_then_discarded(db: Path) -> None:
    seen: list[str] = []

    def confused(conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
        seen.extend(tool_results(conversation)[len(seen) :])
        if assistant_turns(conversation) % 2 == 0:
            return Turn("", (("rm_rf", {}),))
        return Turn("", (("query", "{sql: SELECT"),))

    ((valid, error),) = discarded(db, confused)
    assert not valid and error.startswith("discarded: 5 tool calls in a row failed")
    assert seen[0].startswith("error: no tool 'rm_rf' (tools: read_candidate, write_candidate")
    assert seen[1].startswith("error: the arguments of query are not a JSON object: {sql: SELECT")


def test_three_invalid_candidates_are_discarded(db: Path) -> None:
    def writes_bad_sql(conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
        if assistant_turns(conversation) % 2 == 0:
            return Turn("", (("write_candidate", {"code": "SELECT id, 1 AS label FROM secrets"}),))
        return Turn("", (("commit", {"approach": "hillclimb", "description": "x"}),))

    ((valid, error),) = discarded(db, writes_bad_sql)
    assert not valid and error.startswith(
        "discarded: the candidate was invalid 3 times: rejected, not committed"
    )


def test_committing_the_parent_unchanged_is_refused_then_discarded(db: Path) -> None:
    seen: list[str] = []

    def lazy(conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
        seen.extend(tool_results(conversation)[len(seen) :])
        return Turn("", (("commit", {"approach": "hillclimb", "description": "no change"}),))

    ((valid, error),) = discarded(db, lazy)
    assert not valid and error.startswith("discarded: 5 tool calls in a row failed")
    assert seen[0] == "error: commit: the candidate is the parent unchanged; edit it first"


def test_a_model_over_its_turn_budget_is_discarded(db: Path) -> None:
    reader = lambda conversation, tools: Turn("", (("read_candidate", {}),))  # noqa: E731
    ((valid, error),) = discarded(db, reader, max_turns=4)
    assert not valid and error == "discarded: no commit within 4 turns"


def test_a_context_window_overflow_is_discarded(db: Path) -> None:
    ((valid, error),) = discarded(
        db, investigator, faults=lambda n: Fault.OK if n < 2 else Fault.CONTEXT_OVERFLOW
    )
    assert not valid and error.startswith("discarded: the model call failed:") and "context length" in error


def test_reading_a_held_out_row_gets_the_refusal_of_an_unknown_id(db: Path) -> None:
    """lockpicking6 validates on its pool (its train and val ids are the same rows), so the held-out rows a
    tool must not reach are the test split's."""
    task = load_task("lockpicking6")
    validation_id = next(i for i in task.split("test").ids if i not in set(task.split("train").ids))
    answers: list[str] = []

    def snoop(conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
        step = assistant_turns(conversation)
        if step == 0:
            return Turn("", (("get_question_memory", {"instance_id": validation_id}),))
        if step == 1:
            return Turn("", (("get_question_memory", {"instance_id": "no-such-row"}),))
        answers.extend(tool_results(conversation))
        return Turn("", (("commit", {"approach": "hillclimb", "description": "unchanged"}),))

    discarded(db, snoop)
    assert answers[0] == answers[1].replace("no-such-row", validation_id)
    assert answers[0].startswith("error: get_question_memory:")


def test_a_static_one_shot_baseline_commits_the_fenced_program(db: Path) -> None:
    def one_shot(conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
        assert tools == []  # no tools in the one-shot shape
        parent = conversation[-1]["content"].split("```")[1].strip()
        return Turn(f"Approach: the same program, restated\n```sql\n{parent}\n```")

    with FakeEndpoint(script=one_shot) as server:
        summary = api.evolve(
            "lockpicking6", db=db, budget=2, ai=ai_for(server),
            options={"seed": 1, "mutator": "gepa_like", "policy": "pareto", "mutator_settings": {"model": "fake/x"}},
        )  # fmt: skip
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT valid, approach FROM programs WHERE iteration > 0").fetchall()
        templates = con.execute("SELECT DISTINCT template FROM agent_turns WHERE role = 'user'").fetchall()
    assert rows == [(True, "the same program, restated")] * 2 and summary.iterations == 2
    assert templates == [("gepa_task@1",)]


def test_the_agent_without_a_model_is_a_config_error_before_anything_is_written(db: Path) -> None:
    with pytest.raises(ConfigError, match="the agent mutator needs a model"):
        api.evolve("lockpicking6", db=db, budget=1, options={"mutator": "agent"})
    assert not db.exists()


def advised(decisions: list[dict[str, Any]], ideas: list[dict[str, Any]] | str) -> Script:
    """The investigator, plus a reflector that answers `decisions` in turn and a proposer that answers `ideas`."""
    asked = iter(decisions)

    def script(conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
        system = conversation[0]["content"]
        if system.startswith("You are a strategy-pool controller"):
            return Turn(f"Here is my decision:\n```json\n{json.dumps(next(asked))}\n```")
        if system.startswith("You are an expert algorithm researcher"):
            return Turn(ideas if isinstance(ideas, str) else json.dumps({"ideas": ideas}))
        return investigator(conversation, tools)

    return script


def test_the_reflector_and_proposer_set_the_iterations_strategy(db: Path) -> None:
    """Appendix E: `new` asks the proposer, whose first idea the ledger does not hold becomes the paradigm;
    `keep` feeds the mutation into an active strategy; a `keep` of a strategy the ledger lacks falls back to
    plain hillclimbing. Each role's turns and spending are recorded under its own name."""
    decisions = [
        {"decision": "none", "reason": "nothing tried yet"},
        {"decision": "new", "reason": "hillclimbing is done"},
        {"decision": "keep", "strategy": "Tumbler Guards", "reason": "it paid off"},
        {"decision": "keep", "strategy": "no such strategy", "reason": "?"},
    ]
    ideas = [
        {"name": "the offline search's best guard", "description": "already in the ledger: skipped"},
        {"name": "tumbler guards", "description": "Guard each tumbler pattern with its own CASE branch."},
    ]
    with FakeEndpoint(script=advised(decisions, ideas)) as server:
        summary = api.evolve(
            "lockpicking6", db=db, budget=4, ai=ai_for(server),
            options=options(reflector_model="fake/reflector", proposer_model="fake/proposer"),
        )  # fmt: skip
    with duckdb.connect(str(db), read_only=True) as con:
        ledger = con.execute(
            "SELECT iteration, strategy, kind, paradigm FROM ledger ORDER BY iteration"
        ).fetchall()
        roles = con.execute(
            "SELECT iteration, agent, min(template), max(model) FROM agent_turns "
            "WHERE agent <> 'agent' AND role IN ('system', 'assistant') GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        spent = con.execute(
            "SELECT function, model, sum(calls) FROM ai_usage WHERE split = 'mutator' GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    guards = "tumbler guards: Guard each tumbler pattern with its own CASE branch."
    assert ledger == [
        (1, "hillclimb", "hillclimb", None),
        (2, "tumbler guards", "direction", guards),
        (3, "tumbler guards", "direction", guards),
        (4, "hillclimb", "hillclimb", None),
    ]
    assert roles == [
        (1, "reflector", "reflector_system@1", "fake/reflector"),
        (2, "proposer", "proposer_system@1", "fake/proposer"),
        (2, "reflector", "reflector_system@1", "fake/reflector"),
        (3, "reflector", "reflector_system@1", "fake/reflector"),
        (4, "reflector", "reflector_system@1", "fake/reflector"),
    ]
    assert spent == [("agent", "fake/scripted", 20), ("proposer", "fake/proposer", 1),
                     ("reflector", "fake/reflector", 4)]  # fmt: skip
    with DuckDBStore(db, read_only=True) as store:
        trace = HistoryTools(store, summary.run_id).get_thinking_trace(2)
    assert [t["agent"] for t in trace["transcript"]][:6] == ["reflector"] * 3 + ["proposer"] * 3


@pytest.mark.parametrize(
    ("decision", "ideas", "reason"),
    [
        ("I would keep going.", [], "the reflector's answer was not usable (no JSON object in the answer)"),
        ('{"decision": "pivot", "reason": "x"}', [], "the reflector's decision 'pivot' is not one of keep, new, none"),
        ('{"decision": "new", "reason": "x"}', '{"ideas": []}', "the proposer's answer was not usable (the 'ideas' array names no idea)"),
    ],
)  # fmt: skip
def test_an_unusable_reflector_or_proposer_answer_falls_back_to_hillclimbing(
    db: Path, decision: str, ideas: str | list[dict[str, Any]], reason: str
) -> None:
    def script(conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
        system = conversation[0]["content"]
        if system.startswith("You are a strategy-pool controller"):
            return Turn(decision)
        if system.startswith("You are an expert algorithm researcher"):
            return Turn(ideas if isinstance(ideas, str) else json.dumps({"ideas": ideas}))
        return investigator(conversation, tools)

    with FakeEndpoint(script=script) as server:
        api.evolve(
            "lockpicking6", db=db, budget=1, options=options(reflector_model="fake/r"), ai=ai_for(server)
        )
    with duckdb.connect(str(db), read_only=True) as con:
        ((valid, strategy),) = con.execute(
            "SELECT valid, strategy FROM programs WHERE iteration = 1"
        ).fetchall()
        (payload,) = con.execute("SELECT payload FROM events WHERE kind = 'mutation'").fetchone()
    assert valid and strategy == "hillclimb"
    assert json.loads(payload)["reflector"] == {"decision": "none", "strategy": None, "reason": reason}


def test_the_proposer_without_the_reflector_is_a_config_error(db: Path) -> None:
    with pytest.raises(ConfigError, match="set reflector_model too"):
        api.evolve("lockpicking6", db=db, budget=1, options=options(proposer_model="fake/p"))


# -- issue 25: the draft-test budget, integers past SQL's, and a tool that fails ------------------------------
@pytest.fixture
def train_env() -> Any:
    task = load_task("lockpicking6")
    evaluator = Evaluator(task, ("train",))
    yield task, DraftEnvironment(evaluator)
    evaluator.close()


def toolbox_for(task: Any, env: DraftEnvironment, history: HistoryTools | None = None) -> Toolbox:
    request = MutationRequest(1, ProgramView("1-0", task.seed_program, 0.0), env, history=history)
    return Toolbox(request, Workspace(task.seed_program), np.random.default_rng(0), history=history)


def call(box: Toolbox, name: str, **arguments: Any) -> Any:
    return box.call(ToolCall(f"c{name}", name, arguments, json.dumps(arguments)))


def test_show_draft_spends_the_draft_test_budget_it_shares_with_test_draft(train_env) -> None:
    """show_draft ran a full draft test for free, so the 3 test_draft calls of a mutation were no bound. Now
    both spend the same budget; a candidate tested already is shown again without a new test."""
    task, env = train_env
    box = toolbox_for(task, env)
    drafts = [f"SELECT id, {k} AS label FROM input" for k in range(4)]

    def write(code: str) -> None:
        assert not call(box, "write_candidate", code=code).error

    assert not call(box, "test_draft").error  # the parent: 1 of 3
    write(drafts[0])
    assert not call(box, "test_draft").error  # 2 of 3
    shown = call(box, "show_draft", limit=2)  # tested already: free
    assert not shown.error and len(json.loads(shown.text)["rows"]) == 2
    write(drafts[1])
    assert not call(box, "show_draft").error  # 3 of 3
    assert (box.tests_used, env.drafts_tested) == (3, 3)
    write(drafts[2])
    for tool in ("show_draft", "test_draft"):
        refused = call(box, tool)
        assert refused.error and refused.text == (
            f"error: {tool}: the 3 draft tests of this mutation are spent (test_draft and show_draft share "
            "them); commit now"
        )
    assert (box.tests_used, env.drafts_tested) == (3, 3)  # nothing ran
    write(drafts[0])
    again = call(box, "show_draft")
    assert not again.error and json.loads(again.text)["rows"][0]["output"] is not None
    assert env.drafts_tested == 3


def test_a_tool_that_fails_inside_its_sql_discards_the_mutation(train_env, tmp_path: Path) -> None:
    """Not the agent's mistake, so not a tool error it could act on; and not a crash, which a resume would replay
    from the cache into the same crash: the mutation ends, discarded with the reason."""
    task, env = train_env
    db = tmp_path / "run.duckdb"
    api.evolve("lockpicking6", db=db, budget=1, options={"mutator_settings": {"max_drafts": 2}})
    store = DuckDBStore(db, read_only=True)
    box = toolbox_for(task, env, HistoryTools(store, 1))
    assert not call(box, "get_best_programs", n=1).error
    store.close()  # the history's connection is gone: its next query fails inside DuckDB
    with pytest.raises(Discard, match=r"^tool get_best_programs failed: ConnectionException: "):
        call(box, "get_best_programs", n=1)


def test_an_n_past_bigint_from_the_model_is_a_tool_error_and_the_run_goes_on(db: Path) -> None:
    """get_hard_questions with n = 2**70 raised an uncaught ConversionException: the run crashed, and its resume
    replayed the cached turn into the same crash. Now the agent is told, and the run ends normally."""
    answers: list[str] = []

    def overflowing(conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
        step = assistant_turns(conversation)
        if step == 0:
            return Turn("All of them.", (("get_hard_questions", {"n": 2**70}),))
        answers.extend(tool_results(conversation)[len(answers) :])
        return investigator(
            conversation[:2] + conversation[4:], tools
        )  # the investigator from its first step

    with FakeEndpoint(script=overflowing) as server:
        summary = api.evolve("lockpicking6", db=db, budget=2, options=options(), ai=ai_for(server))
        resumed = api.resume(summary.run_id, db=db, budget=3, ai=ai_for(server))
    assert summary.iterations == 2 and resumed.iterations == 3
    assert (
        answers[0] == f"error: get_hard_questions: n must be a positive integer up to 100,000 (got {2**70})"
    )
    with duckdb.connect(str(db), read_only=True) as con:
        valid = con.execute("SELECT count(*) FROM programs WHERE iteration > 0 AND valid").fetchone()
    assert valid == (3,)
