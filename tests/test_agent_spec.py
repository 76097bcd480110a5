"""The agent spec (coco_sql/languages/agent_spec/spec.py), its validator (validate.py, toolsql.py) and the data-agent
pack loader (pack.py), on the real DABStep pack, real sqlglot and real DuckDB."""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from coco_sql.errors import CandidateRejected, TaskError
from coco_sql.languages.agent_spec.pack import (
    DOCUMENTS_TABLE,
    TaskTables,
    document_sections,
    load_questions,
    load_tables,
)
from coco_sql.languages.agent_spec.spec import (
    MAX_SPEC_BYTES,
    AgentSpec,
    Document,
    Instructions,
    Parameter,
    Tool,
    dump,
    dump_json,
    parse,
)
from coco_sql.languages.agent_spec.toolsql import bind_query
from coco_sql.languages.agent_spec.validate import validate_spec

REPO = Path(__file__).resolve().parents[1]
PACK = REPO / "tasks" / "dabstep"
SEED = (PACK / "seed.yaml").read_text()

FULL = """
models:
  orchestration: claude-4-sonnet
orchestration:
  budget: {seconds: 90, tokens: 30000}
instructions:
  system: |
    You answer questions about a payment processor.
    Use the tools; never guess.

    Quote "exactly" — even \\ backslashes, 'quotes' and ünïcode.
  orchestration: Read the manual's fee section first.
  response: The answer alone.
  sample_questions:
  - question: "What is the average fee of GlobalCard?"
    answer: "0.12"
tools:
- tool_spec:
    type: generic
    name: run_sql
    description: Runs one query.
    input_schema:
      type: object
      properties: {sql: {type: string, description: one SELECT}}
      required: [sql]
- tool_spec:
    type: generic
    name: scheme_fee
    description: The mean fee of a card scheme's rules for a transaction value.
    input_schema:
      type: object
      properties:
        scheme: {type: string, description: "a card scheme, e.g. GlobalCard"}
        value: {type: number, description: the transaction value in euros}
      required: [scheme, value]
tool_resources:
  run_sql: {type: procedure, tables: [fees, fee_acis, documents]}
  scheme_fee:
    type: function
    sql: >-
      SELECT AVG(fixed_amount + rate * :value / 10000) AS fee
      FROM fees WHERE card_scheme = :scheme
semantic_model:
  name: fee_rules
  description: The processor's fee rules.
  tables:
  - name: fees
    description: one rule per row
    columns: [{name: id, description: the rule's id}, {name: card_scheme}]
  - name: fee_acis
    columns: [{name: fee_id}, {name: aci, description: an ACI the rule lists}]
  relationships:
  - {name: acis_of_rule, left_table: fee_acis, left_columns: [fee_id], right_table: fees, right_columns: [id]}
  verified_queries:
  - name: rules_per_scheme
    question: How many rules does each scheme have?
    sql: SELECT card_scheme, COUNT(*) AS n FROM fees GROUP BY card_scheme
documents:
- name: fee_formula
  description: manual, section 5
  text: "fee = fixed_amount + rate * transaction_value / 10000"
"""


@pytest.fixture(scope="module")
def tables() -> TaskTables:
    config = tomllib.loads((PACK / "task.toml").read_text())["agent_spec"]
    return load_tables(
        {name: PACK / path for name, path in config["tables"].items()},
        {name: (PACK / path).read_text() for name, path in config["documents"].items()},
    )


# ------------------------------------------------------------------------------------------- the text form


@pytest.mark.parametrize("text", [SEED, FULL], ids=["seed", "full"])
def test_the_text_form_round_trips_and_is_canonical(text: str) -> None:
    spec = parse(text)
    assert parse(dump(spec)) == spec
    assert dump(parse(dump(spec))) == dump(spec)
    assert parse(dump_json(spec)) == spec  # JSON is the same document


def test_the_full_spec_reads_every_field() -> None:
    spec = parse(FULL)
    assert (spec.model, spec.budget_seconds, spec.budget_tokens) == ("claude-4-sonnet", 90, 30000)
    assert spec.instructions.system.endswith("'quotes' and ünïcode.\n")
    free, fee = spec.tools
    assert (
        free.free and free.tables == ("fees", "fee_acis", "documents") and free.resource_type == "procedure"
    )
    assert fee.sql.startswith("SELECT AVG(") and fee.resource_type == "function"
    assert fee.parameters == (
        Parameter("scheme", "string", "a card scheme, e.g. GlobalCard"),
        Parameter("value", "number", "the transaction value in euros"),
    )
    model = spec.semantic_model
    assert [t.name for t in model.tables] == ["fees", "fee_acis"]
    assert model.relationships[0].right_columns == ("id",)
    assert model.verified_queries[0].name == "rules_per_scheme"
    assert spec.documents == (Document("fee_formula", "fee = fixed_amount + rate * transaction_value / 10000",
                                       "manual, section 5"),)  # fmt: skip
    assert "\n    Use the tools; never guess.\n" in dump(spec)  # multi-line text as a block scalar


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tools: [}", "agent spec line 1, column 9: not valid YAML or JSON"),
        ('{"tools": [1, 2}', "agent spec line 1, column 16: not valid YAML or JSON"),
        ("instructions: {sytem: hi}", "agent spec instructions.sytem: unknown key; allowed here: response,"),
        ("tools: {a: 1}", "agent spec tools: expected a list, got a mapping"),
        ("instructions:\n  system: [a, b]", "agent spec instructions.system: expected text, got a list"),
        (
            "orchestration: {budget: {seconds: 0}}",
            "agent spec orchestration.budget.seconds: expected a whole number",
        ),
        ("a: &x [1]\nb: *x", "agent spec line 2: anchors and aliases"),
        ("models: {}\nmodels: {}", "agent spec line 2: key 'models' appears twice"),
        (
            "tools:\n- tool_spec: {type: generic, name: t, input_schema: {type: object}}",
            "agent spec tool_resources.t: is missing",
        ),
        (
            "tools:\n- tool_spec: {type: cortex_search, name: t, input_schema: {type: object}}",
            "agent spec tools[0].tool_spec.type: 'cortex_search': only custom tools",
        ),
        (
            "tools:\n- tool_spec: {type: generic, name: 2t, input_schema: {type: object}}",
            "agent spec tools[0].tool_spec.name: '2t' is not a name",
        ),
        (
            "tools:\n- tool_spec: {type: generic, name: t, input_schema: {type: object}}\n"
            "tool_resources: {t: {type: procedure, sql: SELECT 1, tables: [fees]}}",
            "agent spec tool_resources.t: needs exactly one of sql",
        ),
        (
            "tools: []\ntool_resources: {ghost: {type: procedure, sql: SELECT 1}}",
            "agent spec tool_resources.ghost: names no tool",
        ),
        (
            "tools:\n- tool_spec: {type: generic, name: t, input_schema: {type: object, properties: {a: {type: date}}}}"
            "\ntool_resources: {t: {type: procedure, sql: SELECT 1}}",
            "agent spec tools[0].tool_spec.input_schema.properties.a.type: must be one of string",
        ),
        ("documents: [{name: d, text: ''}]", "agent spec documents[0].text: must not be empty"),
        ("instructions: {system: " + "x" * 20_001 + "}", "agent spec instructions.system: 20,001 characters"),
        ("#" * (MAX_SPEC_BYTES + 1), "agent spec text: 100,001 bytes, over the limit of 100,000"),
        ("- just\n- a list", "agent spec document: expected a mapping"),
    ],
)
def test_a_malformed_spec_is_refused_with_one_line_naming_its_place(text: str, message: str) -> None:
    with pytest.raises(CandidateRejected) as refused:
        parse(text)
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


# ------------------------------------------------------------------------------------------- the validator


def test_the_seed_and_the_full_spec_are_valid_for_the_pack(tables: TaskTables) -> None:
    assert validate_spec(parse(SEED), tables.schemas) == parse(SEED)
    assert validate_spec(parse(FULL), tables.schemas) == parse(FULL)


def _with_sql(sql: str) -> AgentSpec:
    spec = parse(FULL)
    return replace(spec, tools=(spec.tools[0], replace(spec.tools[1], sql=sql)))


BAD = {
    "writes": (_with_sql("DELETE FROM fees WHERE card_scheme = :scheme AND rate > :value"),
               "tool_resources.scheme_fee.sql: DELETE is not allowed"),
    "writes in a CTE": (_with_sql("WITH d AS (DELETE FROM fees RETURNING id) SELECT :scheme, :value FROM d"),
                        "tool_resources.scheme_fee.sql: "),
    "reads a table the task lacks": (_with_sql("SELECT * FROM payments WHERE merchant = :scheme AND eur > :value"),
                                     "tool_resources.scheme_fee.sql: table 'payments' is not allowed"),
    "reads a file": (_with_sql("SELECT * FROM read_csv('/etc/passwd') WHERE :scheme = :value"),
                     "tool_resources.scheme_fee.sql: "),
    "names no such column": (_with_sql("SELECT fee FROM fees WHERE card_scheme = :scheme AND rate = :value"),
                             "tool_resources.scheme_fee.sql: column check failed: Column 'fee' could not be resolved"),
    "an unused parameter": (_with_sql("SELECT AVG(rate) FROM fees WHERE card_scheme = :scheme"),
                            "tool_resources.scheme_fee.sql: parameter 'value' is never used"),
    "an undeclared placeholder": (_with_sql("SELECT :scheme, :value, :merchant FROM fees"),
                                  "tool_resources.scheme_fee.sql: placeholder :merchant is not a parameter"),
    "a positional placeholder": (_with_sql("SELECT :scheme, :value, ? FROM fees"),
                                 "tool_resources.scheme_fee.sql: positional placeholders (?) are not allowed"),
    "a function outside the allow-list": (_with_sql("SELECT RANDOM(), :scheme, :value FROM fees"),
                                          "tool_resources.scheme_fee.sql: function RANDOM is not allowed"),
    "two statements": (_with_sql("SELECT :scheme, :value; SELECT 1"),
                       "tool_resources.scheme_fee.sql: expected exactly one statement, got 2"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_tool_query_the_candidate_rules_refuse_is_refused(tables: TaskTables, case: str) -> None:
    spec, message = BAD[case]
    with pytest.raises(CandidateRejected) as refused:
        validate_spec(spec, tables.schemas)
    assert str(refused.value).startswith(f"agent spec {message}"), str(refused.value)
    assert "\n" not in str(refused.value)


def test_names_a_spec_refers_to_must_exist_in_the_task(tables: TaskTables) -> None:
    spec = parse(FULL)
    free = replace(spec.tools[0], tables=("fees", "payments"))
    cases = [
        (replace(spec, tools=(free, spec.tools[1])), "tool_resources.run_sql.tables[1]: 'payments' is not a table"),
        (replace(spec, tools=(spec.tools[0], spec.tools[0])), "tools[1].tool_spec.name: 'run_sql' is used twice"),
        (replace(spec, tools=(replace(spec.tools[0], parameters=(Parameter("query", "string"),)),)),
         "tools[0].tool_spec.input_schema: a free SQL tool takes exactly one required string parameter 'sql'"),
        (replace(spec, tools=(spec.tools[0], replace(spec.tools[1], parameters=(
            Parameter("scheme", "string"), Parameter("value", "number", required=False))))),
         "tools[1].tool_spec.input_schema.required: parameter 'value' must be required"),
        (replace(spec, tools=()), "tools: the spec has no tool"),
        (parse(FULL.replace("- name: fee_acis\n    columns", "- name: acis\n    columns")),
         "semantic_model.tables[1].name: 'acis' is not a table of this task"),
        (parse(FULL.replace("{name: fee_id}", "{name: rule}")), "semantic_model.tables[1].columns[0].name: "
         "fee_acis has no column 'rule'"),
        (parse(FULL.replace("right_table: fees", "right_table: merchants")),
         "semantic_model.relationships[0].right_table: 'merchants' is not one of semantic_model.tables"),
        (parse(FULL.replace("SELECT card_scheme, COUNT(*) AS n FROM fees GROUP BY card_scheme",
                            "UPDATE fees SET rate = 0")),
         "semantic_model.verified_queries[0].sql: UPDATE is not allowed"),
        (replace(spec, documents=(spec.documents[0], spec.documents[0])), "documents[1].name: 'fee_formula' is used twice"),
        (replace(spec, documents=tuple(Document(f"d{i}", "x" * 19_000) for i in range(6))),
         "text: 11"),  # each document fits, the whole spec does not: an operator can grow a spec past the limit
    ]  # fmt: skip
    for bad, message in cases:
        with pytest.raises(CandidateRejected) as refused:
            validate_spec(bad, tables.schemas)
        assert str(refused.value).startswith(f"agent spec {message}"), str(refused.value)


def test_arguments_are_bound_as_literals_and_checked_again(tables: TaskTables) -> None:
    sql = parse(FULL).tools[1].sql
    parameters = {"scheme": "string", "value": "number"}

    def bind(**arguments: object) -> str:
        return bind_query(sql, tables.schemas, tables.schemas.keys(), dialect="snowflake",
                          parameters=parameters, arguments=arguments).runnable  # fmt: skip

    assert "card_scheme = 'x'' OR ''1''=''1'" in bind(scheme="x' OR '1'='1", value=10)  # a value, not SQL
    assert "rate * 12.5 / 10000" in bind(scheme="GlobalCard", value=12.5)
    for arguments, message in [
        ({"scheme": "GlobalCard"}, "argument 'value' is required"),
        ({"scheme": "GlobalCard", "value": "10"}, "argument 'value' must be a number"),
        ({"scheme": 3, "value": 10}, "argument 'scheme' must be text"),
        ({"scheme": "GlobalCard", "value": float("nan")}, "argument 'value' must be a finite number"),
        ({"scheme": "GlobalCard", "value": 10, "limit": 1}, "unknown argument 'limit'"),
    ]:
        with pytest.raises(CandidateRejected, match=message):
            bind(**arguments)


# --------------------------------------------------------------------------------------------- the pack


def test_the_pack_loader_reads_the_tables_documents_and_questions(tables: TaskTables) -> None:
    assert {name: len(rows) for name, rows in tables.rows.items()} == {
        "fees": 1000, "fee_account_types": 507, "fee_acis": 1368, "fee_mccs": 6842, "merchants": 30,
        "merchant_acquirers": 49, "merchant_category_codes": 769, "acquirer_countries": 8, DOCUMENTS_TABLE: 41,
    }  # fmt: skip
    assert tables.schemas["fees"]["is_credit"] == "BOOLEAN" and tables.schemas["fees"]["rate"] == "BIGINT"
    sections = tables.rows[DOCUMENTS_TABLE]
    fees_section = sections[sections["title"] == "5. Understanding Payment Processing Fees"].iloc[0]
    assert fees_section["section"] == "manual#7"
    assert "fee = fixed_amount + rate * transaction_value / 10000" in fees_section["text"]
    assert fees_section["text"].startswith("## 5. Understanding") and "## 6." not in fees_section["text"]
    questions = load_questions(PACK / "data" / "questions.csv")
    assert len(questions) == 119 and questions[0].id == "14"
    assert {"level", "template"} <= set(questions[0].extra)


def test_document_sections_ignore_headings_in_code_and_number_in_order() -> None:
    text = "intro\n# One\na\n```\n# not a heading\n```\n## Two\nb\n"
    sections = document_sections("doc", text)
    assert [(s.section, s.title) for s in sections] == [("doc#1", ""), ("doc#2", "One"), ("doc#3", "Two")]
    assert "# not a heading" in sections[1].text


# ---------------------------------------------------------------------- bad input: one line, nothing written


def _refusal(action, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: type[Exception]) -> str:
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(kind) as refused:
        action()
    assert sorted(os.listdir(tmp_path)) == before  # nothing written
    message = str(refused.value)
    assert "\n" not in message and len(message) <= 400
    return message


def test_bad_input_a_spec_whose_tool_writes(tables, tmp_path, monkeypatch) -> None:
    text = """
tools:
- tool_spec: {type: generic, name: archive, description: Copies the fee rules., input_schema: {type: object}}
tool_resources:
  archive: {type: procedure, sql: INSERT INTO fees SELECT * FROM fees}
"""
    message = _refusal(
        lambda: validate_spec(parse(text), tables.schemas), tmp_path, monkeypatch, CandidateRejected
    )
    assert message.startswith("agent spec tool_resources.archive.sql: INSERT is not allowed")


def test_bad_input_a_tool_naming_a_table_the_task_does_not_have(tables, tmp_path, monkeypatch) -> None:
    text = SEED.replace("    - documents\n", "    - payments\n")
    message = _refusal(
        lambda: validate_spec(parse(text), tables.schemas), tmp_path, monkeypatch, CandidateRejected
    )
    assert message.startswith(
        "agent spec tool_resources.run_sql.tables[8]: 'payments' is not a table of this task"
    )


@pytest.mark.parametrize(
    "text", ["instructions:\n  system: [unclosed\n", json.dumps({"tools": []})[:-1]], ids=["yaml", "json"]
)
def test_bad_input_malformed_yaml_or_json(text, tmp_path, monkeypatch) -> None:
    message = _refusal(lambda: parse(text), tmp_path, monkeypatch, CandidateRejected)
    assert "not valid YAML or JSON" in message


def test_bad_input_a_question_row_without_an_expected_answer(tmp_path, monkeypatch) -> None:
    rows = (PACK / "data" / "questions.csv").read_text().splitlines()
    header, first, second = rows[0], rows[1], rows[2]
    second_id = second.split(",")[0]
    source = tmp_path / "in"
    source.mkdir()
    path = source / "questions.csv"
    path.write_text("\n".join([header, first, second[: second.rindex(",")] + ","]) + "\n")
    work = tmp_path / "work"
    work.mkdir()
    message = _refusal(lambda: load_questions(path), work, monkeypatch, TaskError)
    assert message == (f"questions.csv line 3 (id {second_id}): no expected answer (the answer column is empty); "
                       "every row needs one")  # fmt: skip


def test_a_spec_built_in_python_validates_like_one_parsed() -> None:
    spec = AgentSpec(
        instructions=Instructions(system="Answer."),
        tools=(Tool("q", "Runs a query.", (Parameter("sql", "string"),), tables=("fees",)),),
    )
    assert parse(dump(spec)) == spec
