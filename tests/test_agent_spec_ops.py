"""The offline operators of agent specs (coco_sql/languages/agent_spec/ops.py), on histories made by real runs of the
scripted data agent over the DABStep pack: what each operator's drafts can and cannot change."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

import pytest

from coco_sql.languages.agent_spec import ops
from coco_sql.languages.agent_spec.pack import document_sections
from coco_sql.languages.agent_spec.prompt import system_prompt
from coco_sql.languages.agent_spec.spec import Instructions, Parameter, Tool, VerifiedQuery, parse
from coco_sql.languages.agent_spec.tools import ToolBox
from coco_sql.languages.agent_spec.validate import validate_spec
from tests.agent_model import knowledge, rules_in
from tests.dabstep_agent import CONFIG, PACK, RULES, harness, pack_tables, training_sample

SEED = parse((PACK / "seed.yaml").read_text())
SECTIONS = [
    s
    for name, path in CONFIG["agent_spec"]["documents"].items()
    for s in document_sections(name, (PACK / path).read_text())
]


def with_rules(spec, *rules):
    return replace(
        spec,
        instructions=replace(spec.instructions, system=f"{spec.instructions.system}\n\n{' '.join(rules)}"),
    )


def observed(scored):
    return [ops.Observed(s.question.id, s.question.question, s.score == 1.0, s.run.trace) for s in scored]


def test_a_verified_query_from_a_solved_question_answers_its_shape_and_only_its_shape() -> None:
    first, second = training_sample(2, ["account_average_fee"])
    (credit,) = training_sample(1, ["credit_average_fee"])
    with harness() as h:
        history = observed(h.run(with_rules(SEED, *RULES), [first]))
        (draft,) = ops.add_verified_queries(SEED, history)
        assert draft.operator == "add_verified_query"
        assert (
            draft.description
            == f"add verified query vq_{first.id}: the SQL that solved training question {first.id}"
        )
        assert validate_spec(draft.spec, pack_tables().schemas) == draft.spec
        (query,) = draft.spec.semantic_model.verified_queries
        assert query.question == first.question and query.sql == history[0].trace["steps"][-1]["sql"]
        before = h.run(SEED, [second, credit])
        after = h.run(draft.spec, [second, credit])
    assert first.question != second.question  # another account type, scheme or value
    assert [s.score for s in before] == [0.0, 0.0]
    assert [s.score for s in after] == [1.0, 0.0]  # the rules ride in the SQL of one shape only
    assert ops.add_verified_queries(draft.spec, history) == []  # nothing new to add


def test_a_document_section_a_solved_run_read_brings_the_manuals_rules_but_not_more() -> None:
    sample = training_sample(1, ["average_scenario_scheme", "credit_average_fee", "account_average_fee"])
    with harness() as h:
        seed = h.run(SEED, sample)
        history = observed(seed)
        (draft,) = ops.add_document_sections(SEED, history, SECTIONS)
        after = h.run(draft.spec, sample)
    assert [s.score for s in seed] == [1.0, 0.0, 0.0]  # the scheme ranking survives the wrong formula
    (document,) = draft.spec.documents
    assert (document.name, document.description) == (
        "manual_7",
        "manual: 5. Understanding Payment Processing Fees",
    )
    assert draft.description == (f"add document section manual#7 (5. Understanding Payment Processing Fees), read by "
                                 f"solved training questions {sample[0].id}")  # fmt: skip
    # the section states the fee formula and "null applies to all values", not that an empty list does
    assert [s.score for s in after] == [1.0, 1.0, 0.0]
    unsolved = [replace(row, solved=False) for row in history]
    assert ops.add_document_sections(SEED, unsolved, SECTIONS) == []  # only what solved runs read
    assert ops.add_document_sections(draft.spec, history, SECTIONS) == []  # already there


def test_removing_a_verified_query_starts_with_the_one_failed_runs_used() -> None:
    rows = training_sample(2, ["fee_ids_for_account_aci"])
    with harness() as h:
        wrong = h.run(SEED, rows)  # without the empty-list rule: the wrong query, twice
        right = h.run(with_rules(SEED, *RULES), rows[:1])
    history = observed(wrong) + observed(right)
    good = VerifiedQuery("good", rows[0].question, right[0].run.trace["steps"][-1]["sql"])
    bad = VerifiedQuery("bad", rows[1].question, wrong[1].run.trace["steps"][-1]["sql"])
    spec = replace(SEED, semantic_model=replace(SEED.semantic_model, verified_queries=(good, bad)))
    drafts = ops.remove_verified_queries(spec, history)
    assert [d.description for d in drafts] == [
        "remove verified query bad: its shape ran in 2 failed and 0 solved training questions",
        "remove verified query good: its shape ran in 0 failed and 1 solved training questions",
    ]
    assert [q.name for q in drafts[0].spec.semantic_model.verified_queries] == ["good"]
    assert ops.shape(good.sql) != ops.shape(bad.sql) and ops.shape(bad.sql) == ops.shape(
        wrong[0].run.trace["steps"][-1]["sql"]
    )


def test_moving_tool_text_keeps_every_word_and_what_a_whole_spec_reader_knows() -> None:
    tool = Tool(
        "scheme_fee",
        "The mean fee of a scheme's rules. Give the scheme as it is written in fees. Transaction values are euros.",
        (Parameter("scheme", "string", "a card scheme"), Parameter("value", "number", "")),
        sql="SELECT AVG(fixed_amount + rate * :value / 10000) AS fee FROM fees WHERE card_scheme = :scheme",
    )
    spec = replace(SEED, tools=(*SEED.tools, tool))
    drafts = ops.move_tool_text(spec)
    assert [d.description for d in drafts] == [
        "tools[0] run_sql: move the parameter docs into the description",
        "tools[1] scheme_fee: move the parameter docs into the description",
        "tools[1] scheme_fee: move the description's sentences about scheme into its parameter doc",
    ]
    moved = drafts[1].spec.tools[1]
    assert (
        moved.description.endswith("Parameters: scheme: a card scheme")
        and moved.parameters[0].description == ""
    )
    split = drafts[2].spec.tools[1]
    assert split.description == "The mean fee of a scheme's rules. Transaction values are euros."
    assert split.parameters[0].description == "a card scheme Give the scheme as it is written in fees."
    tables = pack_tables()
    words = Counter(re.findall(r"\w+", knowledge_of(spec, tables)))
    for draft in drafts:
        assert validate_spec(draft.spec, tables.schemas) == draft.spec
        assert rules_in(knowledge_of(draft.spec, tables)) == rules_in(knowledge_of(spec, tables))
        assert not words - Counter(re.findall(r"\w+", knowledge_of(draft.spec, tables)))  # no word lost


def knowledge_of(spec, tables) -> str:
    with ToolBox(spec, tables.rows, tables.schemas) as box:
        tools = [
            {"name": t.name, "description": t.description, "parameters": t.parameters} for t in box.chat_tools
        ]
    return knowledge([{"role": "system", "content": system_prompt(spec, tables.schemas, "snowflake")}], tools)


def test_reordering_instructions_moves_whole_paragraphs_and_sentences() -> None:
    system = "You analyse fees. Use SQL.\n\nNever guess.\n\nAnswer briefly."
    spec = replace(SEED, instructions=Instructions(system=system, orchestration="Read the manual first."))
    drafts = ops.reorder_instructions(spec)
    assert [(d.operator, d.description) for d in drafts] == [
        ("reorder_instructions", "instructions.system: put the last paragraph first"),
        ("split_instructions", "instructions.system: split paragraph 1 into one sentence per line"),
        (
            "reorder_instructions",
            "move the last paragraph of instructions.system to instructions.orchestration",
        ),
    ]
    assert (
        drafts[0].spec.instructions.system == "Answer briefly.\n\nYou analyse fees. Use SQL.\n\nNever guess."
    )
    assert drafts[1].spec.instructions.system.startswith("- You analyse fees.\n- Use SQL.\n\nNever guess.")
    assert drafts[2].spec.instructions.system == "You analyse fees. Use SQL.\n\nNever guess."
    assert drafts[2].spec.instructions.orchestration == "Read the manual first.\n\nAnswer briefly."
    for draft in drafts:
        assert validate_spec(draft.spec, pack_tables().schemas) == draft.spec
    one = replace(SEED, instructions=Instructions(system="Answer with SQL."))
    assert ops.reorder_instructions(one) == []  # one paragraph, one sentence: nothing to reorder
    assert len(ops.reorder_instructions(SEED)) == 1  # the seed's paragraph has two sentences: split it


@pytest.mark.parametrize("operator", ["reorder_instructions", "move_tool_text"])
def test_operators_are_pure_functions_of_their_inputs(operator: str) -> None:
    spec = with_rules(SEED, *RULES)
    assert getattr(ops, operator)(spec) == getattr(ops, operator)(spec)
