"""Running agent specs (coco_sql/languages/agent_spec/runtime.py, tools.py, trace.py) on the DABStep pack: a scripted
model behind a real local HTTP server, driven through coco_sql's OpenAI-compatible client and AI runtime, with every
tool call executed in the real SQL sandbox. The model follows the spec (tests/agent_model.py): a question is answered
correctly only when the spec carries the rule it needs."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest

from coco_sql.errors import EvaluationError, ProviderUnavailable
from coco_sql.languages.agent_spec import ops
from coco_sql.languages.agent_spec.pack import document_sections, load_tables
from coco_sql.languages.agent_spec.runtime import RunLimits, run_question
from coco_sql.languages.agent_spec.spec import AgentSpec, Parameter, Tool, dump, parse
from coco_sql.languages.agent_spec.tools import SandboxQueries, ToolBox
from coco_sql.languages.agent_spec.toolsql import CheckedQuery
from coco_sql.languages.agent_spec.trace import MAX_TRACE_CHARS, encode, read_sections
from coco_sql.llm import AiCache
from tests import leakage_probe
from tests.dabstep_agent import (
    CONFIG,
    PACK,
    RULES,
    harness,
    pack_tables,
    questions,
    splits,
    total,
    training_sample,
)
from tests.llm_double import Turn

FEE_TEMPLATES = (
    "credit_average_fee",
    "account_average_fee",
    "account_mcc_average_fee",
    "most_expensive_mcc",
    "average_scenario_scheme",
    "fee_ids_for_account_aci",
)
SEED = parse((PACK / "seed.yaml").read_text())


def with_rules(spec: AgentSpec, *rules: str) -> AgentSpec:
    system = spec.instructions.system + "\n\n" + " ".join(rules)
    return replace(spec, instructions=replace(spec.instructions, system=system))


@pytest.fixture(scope="module")
def sample():
    return training_sample(2, FEE_TEMPLATES)


def by_template(scored) -> dict[str, float]:
    found: dict[str, float] = {}
    for s in scored:
        found[s.question.extra["template"]] = found.get(s.question.extra["template"], 0.0) + s.score
    return found


def test_a_question_is_answered_correctly_only_when_the_spec_carries_its_rule(sample) -> None:
    with harness() as h:
        seed = h.run(SEED, sample)
        fee_and_null = h.run(with_rules(SEED, *RULES[:2]), sample)
        every_rule = h.run(with_rules(SEED, *RULES), sample)
        in_the_tool = h.run(
            replace(SEED, tools=(replace(SEED.tools[0], description=" ".join(RULES)),)), sample
        )
    assert len(sample) == 12
    # the seed states no rule: only a ranking that the wrong fee formula happens to keep comes out right
    assert by_template(seed) == {**dict.fromkeys(FEE_TEMPLATES, 0.0), "average_scenario_scheme": 2.0}
    # the manual's two rules (fee formula, null = all) answer the questions that need only those
    assert by_template(fee_and_null) == {**dict.fromkeys(FEE_TEMPLATES, 0.0), "credit_average_fee": 2.0,
                                         "average_scenario_scheme": 2.0}  # fmt: skip
    assert total(every_rule) == total(in_the_tool) == 12.0  # wherever the spec states them
    for s in every_rule:
        assert s.run.trace["stop"] == "answer" and s.run.answer is not None


def test_the_trace_holds_the_conversation_the_tool_calls_their_sql_and_results(sample) -> None:
    question = next(q for q in sample if q.extra["template"] == "credit_average_fee")
    with harness() as h:
        (scored,) = h.run(with_rules(SEED, *RULES), [question])
    trace = scored.run.trace
    assert scored.score == 1.0 and trace["answer"] == scored.run.answer
    assert trace["question_id"] == question.id and trace["model"] == "fake/data-agent"
    assert trace["user"].startswith(question.question) and "Guidelines: " in trace["user"]
    assert [m["role"] for m in trace["messages"]] == ["assistant", "tool", "assistant", "tool", "assistant"]
    lookup, query = trace["steps"]
    assert lookup["tool"] == query["tool"] == "run_sql"
    assert lookup["tables"] == ["documents"] and lookup["columns"] == ["section", "title", "text"]
    assert read_sections(trace) == ["manual#7"]
    assert (
        query["sql"] == query["arguments"]["sql"] and "(f.is_credit OR f.is_credit IS NULL)" in query["sql"]
    )
    assert query["tables"] == ["fees"] and query["row_count"] == 1 and not query["truncated"]
    assert f"{query['rows'][0][0]:.6f}" == question.answer
    assert trace["usage"]["turns"] == 3 and trace["usage"]["input_tokens"] > 0
    assert question.answer not in json.dumps(trace["messages"][:-1])  # only the final turn states it
    assert json.loads(encode(trace)) == trace and len(encode(trace)) <= MAX_TRACE_CHARS


def test_a_rerun_and_a_resumed_run_replay_from_the_cache_without_a_request(sample) -> None:
    spec = with_rules(SEED, *RULES)
    rows = sample[:4]
    with harness() as h:
        first = h.run(spec, rows)
        requests, turns = h.endpoint.request_count, h.model.turns
        again = h.run(spec, rows)
        assert (h.endpoint.request_count, h.model.turns) == (requests, turns)  # every turn from the cache
        responses, embeddings = h.runtime.cache.drain()
        stored = AiCache()
        stored.load(responses, embeddings)  # what a resumed run reads back from the store
        h.runtime.close()
        h.runtime = h.fresh_runtime(stored)
        resumed = h.run(spec, rows)
        assert h.endpoint.request_count == requests
        h.run(with_rules(spec, "Be brief."), rows[:1])  # another spec is another request
        assert h.endpoint.request_count > requests
    assert [encode(s.run.trace) for s in first] == [encode(s.run.trace) for s in again]
    assert [encode(s.run.trace) for s in first] == [encode(s.run.trace) for s in resumed]
    assert requests == sum(s.run.trace["usage"]["turns"] for s in first)


def test_budgets_end_a_run_without_an_answer(sample) -> None:
    question = sample[0]
    spec = with_rules(SEED, *RULES)
    with harness() as h:
        (turns,) = h.run(spec, [question], RunLimits(max_turns=1))
        (tokens,) = h.run(replace(spec, budget_tokens=300), [question])
    assert turns.run.answer is None and turns.score == 0.0
    assert turns.run.trace["stop"] == "budget: 1 model turns without a final answer"
    assert len(turns.run.trace["steps"]) == 1  # the call it asked for still ran
    assert (
        tokens.run.answer is None
        and tokens.run.trace["stop"] == "budget: 300 tokens spent without a final answer"
    )
    looping = lambda m, t: Turn("", (("run_sql", {"sql": "SELECT 1 AS x FROM fees"}),))  # noqa: E731
    with harness(script=looping, latency_s=0.4) as h:
        (timed,) = h.run(replace(spec, budget_seconds=1), [question])
    assert timed.run.answer is None
    assert timed.run.trace["stop"].startswith(("budget: 1 s passed", "stopped: the model call failed"))


def test_a_dead_endpoint_stops_the_run_instead_of_failing_the_spec(sample) -> None:
    with harness() as h:
        h.endpoint.stop()
        with pytest.raises(ProviderUnavailable):
            h.run(SEED, sample[:1])


def test_a_refused_or_failed_call_goes_back_to_the_model_and_the_run_goes_on() -> None:
    calls = [
        ("run_sql", {"sql": "DELETE FROM fees"}),
        ("run_sql", {"sql": "SELECT * FROM merchants"}),
        ("run_sql", {"sql": "SELECT CAST(card_scheme AS INTEGER) AS x FROM fees"}),
        ("scheme_fee", {"scheme": "GlobalCard", "value": "ten"}),
        ("drop_table", {}),
        ("run_sql", '{"sql": '),
        ("scheme_fee", {"scheme": "GlobalCard", "value": 10}),
    ]

    def script(messages, tools):
        done = sum(m["role"] == "tool" for m in messages)
        return Turn("", (calls[done],)) if done < len(calls) else Turn("done")

    spec = replace(SEED, tools=(
        replace(SEED.tools[0], tables=("fees",)),
        Tool("scheme_fee", "Mean fee.", (Parameter("scheme", "string"), Parameter("value", "number")),
             sql="SELECT AVG(fixed_amount + rate * :value / 10000) AS fee FROM fees WHERE card_scheme = :scheme"),
    ))  # fmt: skip
    tables = pack_tables()
    with harness(script=script) as h, ToolBox(spec, tables.rows, tables.schemas) as box:
        run = run_question(spec, "x", "What is it?", "", runtime=h.runtime, toolbox=box, model="fake/m")
    errors = [step.get("error") for step in run.trace["steps"]]
    assert errors[0].startswith("refused: DELETE is not allowed")
    assert errors[1].startswith("refused: table 'merchants' is not allowed")
    assert errors[2].startswith("query failed: Conversion Error")  # it passed the checks and failed in DuckDB
    assert errors[3] == "refused: argument 'value' must be a number, got 'ten'"
    assert errors[4] == "no tool 'drop_table'; the tools are run_sql, scheme_fee"
    assert errors[5] == "the arguments are not a JSON object"
    last = run.trace["steps"][6]
    assert errors[6] is None and "card_scheme = 'GlobalCard'" in last["sql"] and last["row_count"] == 1
    assert run.answer == "done" and run.trace["stop"] == "answer"


def test_a_free_sql_tool_runs_where_only_its_tables_exist() -> None:
    queries = SandboxQueries(pack_tables().rows, memory_mb=1024)

    def count(table: str) -> object:
        sql = f"SELECT count(*) FROM {table}"
        return queries.run(CheckedQuery(sql, sql, frozenset({table})), ("fees",), 10.0)[1]

    try:
        assert count("fees") == [(1000,)]
        with pytest.raises(EvaluationError, match="merchants does not exist"):
            count("merchants")  # past the validator, the table is not there
    finally:
        queries.close()


def test_a_large_result_is_cut_to_the_bounds_the_model_and_the_trace_share() -> None:
    def script(messages, tools):
        if any(m["role"] == "tool" for m in messages):
            return Turn("seen")
        return Turn("", (("run_sql", {"sql": "SELECT id, card_scheme FROM fees ORDER BY id"}),))

    tables = pack_tables()
    with harness(script=script) as h, ToolBox(SEED, tables.rows, tables.schemas) as box:
        run = run_question(SEED, "x", "List the rules.", "", runtime=h.runtime, toolbox=box, model="fake/m")
        sent = json.loads(h.endpoint.requests[-1].body["messages"][-1]["content"])
    (step,) = run.trace["steps"]
    assert step["row_count"] == 1000 and len(step["rows"]) == 50 and step["truncated"]
    assert sent == {
        "columns": ["id", "card_scheme"],
        "rows": step["rows"],
        "row_count": 1000,
        "truncated": True,
    }


# ------------------------------------------------------------------------------------------------ leakage


def _curious(messages, tools):
    """A model that reads every table the prompt lists, then answers: it shows whatever the sandbox holds."""
    system = messages[0]["content"]
    names = [line[2:].split("(")[0] for line in system.splitlines() if line.startswith("- ")]
    done = sum(m["role"] == "tool" for m in messages)
    if done < len(names):
        return Turn("", (("run_sql", {"sql": f"SELECT * FROM {names[done]}"}),))
    return Turn("read everything")


def test_no_held_out_answer_reaches_a_trace_a_tool_result_or_a_draft(tmp_path: Path) -> None:
    rows = questions()
    parts = splits(rows)
    planted, markers = leakage_probe.plant(rows, parts["val"] + parts["test"])
    train = [q for q in planted if q.id in set(parts["train"])]
    sample = [q for q in train if q.extra["template"] in FEE_TEMPLATES][:18]
    texts = []
    with harness() as h:
        history = []
        for spec in (SEED, with_rules(SEED, *RULES[:2]), with_rules(SEED, *RULES)):
            for s in h.run(spec, sample):
                texts.append(encode(s.run.trace))
                history.append(ops.Observed(s.question.id, s.question.question, s.score == 1.0, s.run.trace))
    sections = [s for name, path in CONFIG["agent_spec"]["documents"].items()
                for s in document_sections(name, (PACK / path).read_text())]  # fmt: skip
    spec = ops.add_verified_queries(SEED, history)[0].spec
    drafts = [*ops.add_verified_queries(SEED, history), *ops.remove_verified_queries(spec, history),
              *ops.add_document_sections(SEED, history, sections), *ops.move_tool_text(SEED),
              *ops.reorder_instructions(with_rules(SEED, *RULES))]  # fmt: skip
    texts += [dump(d.spec) + d.description for d in drafts]
    assert len(history) == 54 and len(drafts) > 10
    assert "questions" not in pack_tables().rows  # the expected answers are never a table of the agent
    assert leakage_probe.found(texts, markers) == []
    # the probe finds a leak when there is one: a pack that offered the questions file as a table
    leaky = tmp_path / "questions.csv"
    with leaky.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "question", "answer"])
        writer.writerows([q.id, q.question, q.answer] for q in planted)
    exposed = load_tables({"fees": PACK / "data" / "fees.csv", "questions": leaky})
    spec = replace(SEED, tools=(replace(SEED.tools[0], tables=("fees", "questions")),))
    with harness(exposed, script=_curious) as h, ToolBox(spec, exposed.rows, exposed.schemas) as box:
        run = run_question(
            spec, train[0].id, train[0].question, "", runtime=h.runtime, toolbox=box, model="fake/m"
        )
    assert leakage_probe.found([encode(run.trace)], markers)
