"""The cortex_agent export (coco_sql/languages/agent_spec/export.py): the statements it writes, checked against
Snowflake's documented specification fields and read back with sqlglot where sqlglot can parse them."""

from __future__ import annotations

import re

import pytest
import sqlglot
import yaml
from sqlglot import exp

from coco_sql.errors import ConfigError
from coco_sql.languages.agent_spec.export import (
    DOCUMENTED_KEYS,
    check_documented,
    export_cortex_agent,
    sqlglot_reading,
)
from coco_sql.languages.agent_spec.prompt import system_prompt
from coco_sql.languages.agent_spec.spec import parse, to_document
from tests.dabstep_agent import PACK, pack_tables
from tests.test_agent_spec import FULL

SEED = parse((PACK / "seed.yaml").read_text())


def export(spec, **options):
    settings = {"name": "fee_agent", "database": "ANALYTICS", "schema": "AGENTS", "warehouse": "AGENT_WH"}
    return export_cortex_agent(spec, tables=pack_tables().schemas, **{**settings, **options})


def agent_document(statement: str) -> dict:
    body = re.search(r"FROM SPECIFICATION\n\$\$\n(.*)\$\$\Z", statement, flags=re.DOTALL)
    assert body is not None
    return yaml.safe_load(body.group(1))


def test_the_full_spec_exports_procedures_a_semantic_view_and_the_agent() -> None:
    spec = parse(FULL)
    result = export(spec, comment="exported by coco-sql")
    kinds = [statement.split("\n")[0][:38] for statement in result.statements]
    assert kinds == [
        "CREATE ROLE IF NOT EXISTS FEE_AGENT_RU",
        "GRANT USAGE ON DATABASE ANALYTICS TO R",
        "GRANT USAGE ON SCHEMA ANALYTICS.AGENTS",
        "GRANT SELECT ON TABLE ANALYTICS.AGENTS",
        "GRANT SELECT ON TABLE ANALYTICS.AGENTS",
        "GRANT SELECT ON TABLE ANALYTICS.AGENTS",
        "CREATE OR REPLACE PROCEDURE ANALYTICS.",
        "GRANT OWNERSHIP ON PROCEDURE ANALYTICS",
        "CREATE OR REPLACE PROCEDURE ANALYTICS.",
        "CREATE OR REPLACE SEMANTIC VIEW ANALYT",
        "CREATE OR REPLACE AGENT ANALYTICS.AGEN",
    ]
    document = agent_document(result.statements[-1])
    assert document == yaml.safe_load(result.specification)
    check_documented(document)  # every key is one Snowflake documents
    assert document["models"] == {"orchestration": "claude-4-sonnet"}
    assert document["orchestration"] == {"budget": {"seconds": 90, "tokens": 30000}}
    assert document["tool_resources"] == {
        name: {"type": "procedure", "identifier": f"ANALYTICS.AGENTS.{name}",
               "execution_environment": {"type": "warehouse", "warehouse": "AGENT_WH", "query_timeout": 60}}
        for name in ("run_sql", "scheme_fee")
    }  # fmt: skip
    run_sql, scheme_fee = (tool["tool_spec"] for tool in document["tools"])
    assert scheme_fee == to_document(spec)["tools"][1]["tool_spec"]  # the tool_spec is Snowflake's already
    assert run_sql["description"].startswith(
        "Runs one query.\n\nrun_sql runs one read-only Snowflake SQL query"
    )
    assert "- fee_acis(fee_id BIGINT, aci VARCHAR)" in run_sql["description"]
    system = document["instructions"]["system"]
    shown = system_prompt(spec, pack_tables().schemas, "snowflake")
    for part in (
        "# Data model: fee_rules",
        "## rules_per_scheme",
        "# Document: fee_formula (manual, section 5)",
    ):
        assert (
            part in system and part in shown
        )  # what the runs showed the model, written where Snowflake's reads
    assert document["instructions"]["sample_questions"] == [
        {"question": "What is the average fee of GlobalCard?", "answer": "0.12"}
    ]


def test_sqlglot_reads_the_statements_it_has_a_grammar_for() -> None:
    result = export(parse(FULL))
    readings = [sqlglot_reading(statement) for statement in result.statements]
    assert readings[:6] == ["Command", "Grant", "Grant", "Grant", "Grant", "Grant"]
    assert readings[6] == readings[8] == "Create"  # the procedures
    assert readings[7] == "Command"  # GRANT OWNERSHIP: no sqlglot grammar
    assert readings[10] == "Command"  # CREATE AGENT: no sqlglot grammar; checked by DOCUMENTED_KEYS
    procedure = result.statements[8]
    body = re.search(r"RESULTSET DEFAULT \((.*)\);\nBEGIN", procedure, flags=re.DOTALL).group(1)
    query = sqlglot.parse_one(body, read="snowflake")
    assert isinstance(query, exp.Select)
    assert {t.sql("snowflake") for t in query.find_all(exp.Table)} == {"ANALYTICS.AGENTS.fees"}
    assert sorted(p.name for p in query.find_all(exp.Placeholder)) == ["scheme", "value"]
    assert "PROCEDURE ANALYTICS.AGENTS.scheme_fee(scheme VARCHAR, value FLOAT)" in procedure
    free = result.statements[6]
    assert "EXECUTE AS OWNER" in free and "res := (EXECUTE IMMEDIATE :sql);" in free
    view = result.statements[9]
    assert "fees AS ANALYTICS.AGENTS.fees PRIMARY KEY (id) COMMENT = 'one rule per row'" in view
    assert "acis_of_rule AS fee_acis (fee_id) REFERENCES fees (id)" in view
    assert "fees.id AS id COMMENT = 'the rule''s id'" in view


def test_the_seed_exports_one_tool_and_no_semantic_view() -> None:
    result = export(SEED)
    assert not any("SEMANTIC VIEW" in s for s in result.statements)
    document = agent_document(result.statements[-1])
    assert [t["tool_spec"]["name"] for t in document["tools"]] == ["run_sql"] and "models" not in document
    assert sum(s.startswith("GRANT SELECT ON TABLE") for s in result.statements) == 9


def test_an_analyst_tool_over_the_semantic_view_only_when_asked() -> None:
    document = agent_document(export(parse(FULL), analyst_tool=True).statements[-1])
    assert document["tools"][-1]["tool_spec"]["type"] == "cortex_analyst_text_to_sql"
    assert document["tool_resources"]["fee_agent_analyst"]["semantic_view"] == "ANALYTICS.AGENTS.fee_rules"
    check_documented(document)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"tool_resources": {"run_sql": {"type": "procedure", "tables": ["fees"]}}},
            "agent specification tool_resources.run_sql.tables: not a documented field",
        ),
        (
            {"tools": [{"tool_spec": {"type": "generic", "name": "t", "sql": "SELECT 1"}}]},
            "agent specification tools[0].tool_spec.sql: not a documented field",
        ),
        ({"semantic_model": {}}, "agent specification semantic_model: not a documented field"),
        ({"orchestration": {"budget": {"turns": 3}}}, "agent specification orchestration.budget.turns"),
    ],
)
def test_the_documented_field_table_refuses_our_own_keys(document: dict, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        check_documented(document)
    assert str(refused.value).startswith(message)


def test_the_documented_field_table_holds_the_create_agent_structure() -> None:
    assert DOCUMENTED_KEYS[()] == {"models", "orchestration", "instructions", "tools", "tool_resources"}
    assert DOCUMENTED_KEYS[("instructions",)] == {"response", "orchestration", "system", "sample_questions"}
    assert DOCUMENTED_KEYS[("tools", "[]", "tool_spec")] == {"type", "name", "description", "input_schema"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "fee agent"}, "agent name 'fee agent' is not a plain Snowflake identifier"),
        ({"database": "A;DROP"}, "database 'A;DROP' is not a plain Snowflake identifier"),
        ({"dialect": "duckdb"}, "export to Snowflake needs a spec whose SQL is Snowflake SQL, not duckdb"),
    ],
)
def test_an_export_that_cannot_be_written_is_one_line(options: dict, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        export(SEED, **options)
    assert str(refused.value).startswith(message)


def test_text_that_would_end_a_dollar_quoted_block_is_refused() -> None:
    spec = parse(FULL.replace("The answer alone.", "The answer alone, in $$."))
    with pytest.raises(ConfigError, match=r"contains '\$\$'"):
        export(spec)
