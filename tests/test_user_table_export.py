"""Exports run on the user's table as it is (issue 38, item 4): a task registered with `{'id_column':
'ticket_id'}` over `tickets(ticket_id, ticket_body, category)` is exported in every form, and each form, run on
that table, answers what the run recorded for each row; the id comes back under the table's own name. Before,
the view selected `id` and failed with `Referenced column "id" not found`. In DuckDB, and in Snowpark's local
testing under the strict emulation of a stored procedure's limits (`CALL coco_export` there, with its deploy
check). A seed whose output is an AI function's whole object is refused at coco_task, and by the CLI, in one line
that says what to write."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
import sqlglot
from pack_copies import text_pack

import coco_sql
from coco_sql import api
from coco_sql.errors import TaskError
from tests.conftest import run_cli

WORDS = ["refund", "crash", "invoice", "login", "charge", "error", "dark mode", "export"]
LABELS = {"refund": "billing", "invoice": "billing", "charge": "billing", "crash": "bug", "error": "bug"}
SEED = (
    "SELECT id, CASE WHEN ticket_body ILIKE '%refund%' THEN 'billing' ELSE 'other' END AS category FROM input"
)
OPTIONS = {"label": "category", "id_column": "ticket_id", "dialect": "duckdb", "seed_program": SEED}
FORMS = (
    "duckdb_view",
    "duckdb_macro",
    "snowflake_view",
    "snowflake_function",
    "dbt",
)


def tickets() -> pd.DataFrame:
    rows = [
        (
            1000 + 7 * i,
            f"ticket {i}: {WORDS[i % len(WORDS)]} again",
            LABELS.get(WORDS[i % len(WORDS)], "other"),
        )
        for i in range(48)
    ]
    return pd.DataFrame(rows, columns=["ticket_id", "ticket_body", "category"])


def recorded(evaluations: pd.DataFrame, program_id: str) -> dict[str, Any]:
    rows = evaluations[evaluations["program_id"] == program_id]
    return {str(r.instance_id): json.loads(r.output) for r in rows.itertuples()}


def answers(
    code: str, form: str, table: pd.DataFrame, id_column: str, output: str = "category"
) -> dict[str, Any]:
    """The form's rows over `table` (named tickets), in DuckDB: the DuckDB forms as written, the Snowflake forms
    transpiled by sqlglot (a view's query, a function's body, a dbt model without its Jinja)."""
    con = duckdb.connect()
    con.register("frame", table)
    con.execute("CREATE TABLE tickets AS SELECT * FROM frame")
    if form in ("duckdb_view", "duckdb_macro"):
        con.execute(code)
        name = re.search(r"(VIEW|MACRO) (\w+)", code).group(2)  # type: ignore[union-attr]
        query = f"SELECT * FROM {name}" + ("()" if form == "duckdb_macro" else "")
    elif form == "snowflake_ai_function":  # its arguments carry the columns of the same names
        body = code.split("$$")[1]
        query = f"SELECT {id_column}, {body} AS {output} FROM tickets"
    else:
        text = code.split("$$")[1] if form == "snowflake_function" else code
        text = re.sub(r"\{\{.*?\}\}\n?", lambda m: "tickets" if "ref(" in m.group(0) else "", text)
        text = re.sub(r"^--.*\n", "", text, flags=re.M)
        select = text[text.index("SELECT") :].rstrip().rstrip(";") if "VIEW" in text else text.rstrip(";\n")
        query = sqlglot.transpile(select, read="snowflake", write="duckdb")[0]
    frame = con.execute(query).df()
    return {str(int(row[id_column])): row[output] for _, row in frame.iterrows()}  # NUMBER: a decimal


@pytest.fixture(scope="module")
def duckdb_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    db = tmp_path_factory.mktemp("user_table") / "tickets.duckdb"
    con = coco_sql.connect(db)
    con.register("frame", tickets())
    con.execute("CREATE TABLE tickets AS SELECT * FROM frame")
    con.execute("CALL coco_task('tickets', 'tickets', ?::JSON)", [json.dumps(OPTIONS)]).fetchall()
    summary = con.execute("FROM coco_evolve('tickets', 1, {'seed': 1})").df()
    champion = str(summary["champion_id"][0])
    evaluations = con.execute("SELECT * FROM evaluations").df()
    con.close()
    yield db, recorded(evaluations, champion)


@pytest.mark.parametrize("form", FORMS)
def test_every_form_runs_on_the_users_table_and_answers_what_the_run_recorded(
    duckdb_run: tuple[Path, dict[str, Any]], form: str
) -> None:
    db, seen = duckdb_run
    code = api.export(db=db, form=form).code
    assert "ticket_id AS id" in code
    got = answers(code, form, tickets(), "ticket_id")
    assert len(got) == 48 and {i: got[i] for i in seen} == seen  # every row the run scored, as it scored it
    assert api.export_findings(api.export(db=db), form, db=db) == []  # the deploy check has nothing to say


def test_a_champion_without_an_ai_call_is_no_ai_function_and_says_which_forms_take_it(
    duckdb_run: tuple[Path, dict[str, Any]],
) -> None:
    with pytest.raises(
        TaskError, match=r"cannot be an AI function: .*calls no scalar AI function.*snowflake_view$"
    ):
        api.export(db=duckdb_run[0], form="snowflake_ai_function")


def test_a_union_returns_its_id_under_the_tables_name(tmp_path: Path) -> None:
    con = coco_sql.connect(tmp_path / "u.duckdb")
    con.register("frame", tickets())
    con.execute("CREATE TABLE tickets AS SELECT * FROM frame")
    union = (
        "SELECT id, 'billing' AS category FROM input WHERE ticket_body ILIKE '%refund%' UNION ALL "
        "SELECT id, 'other' AS category FROM input WHERE NOT ticket_body ILIKE '%refund%'"
    )
    con.execute("CALL coco_task('u', 'tickets', ?::JSON)", [json.dumps({**OPTIONS, "seed_program": union})])
    con.execute("FROM coco_evolve('u', 0, {'seed': 1})").fetchall()
    view = con.execute("SELECT code FROM coco_export(1, 'duckdb_view')").fetchone()[0]
    con.execute(view)
    rows = con.execute("SELECT ticket_id, category FROM coco_u_champion ORDER BY ticket_id").fetchall()
    assert len(rows) == 48 and rows[0] == (1000, "billing")


@pytest.mark.parametrize(
    ("seed", "fix"),
    [
        ("AI_CLASSIFY(ticket_body, ['billing', 'bug', 'other'])", ":labels[0]::string AS category"),
        ("AI_CLASSIFY(ticket_body, ['billing', 'bug', 'other'])::string", ":labels[0]::string AS category"),
        ("AI_SENTIMENT(ticket_body)", ":categories[0]:sentiment::string AS category"),
    ],
)
def test_a_seed_returning_the_whole_ai_object_is_refused_at_coco_task_saying_what_to_write(
    tmp_path: Path, seed: str, fix: str
) -> None:
    con = coco_sql.connect(tmp_path / "s.duckdb")
    con.register("frame", tickets())
    con.execute("CREATE TABLE tickets AS SELECT * FROM frame")
    options = {
        "label": "category",
        "id_column": "ticket_id",
        "seed_program": f"SELECT id, {seed} AS category FROM input",
    }
    with pytest.raises(duckdb.Error) as raised:
        con.execute("CALL coco_task('s', 'tickets', ?::JSON)", [json.dumps(options)])
    message = str(raised.value)
    assert "option 'seed_program' is rejected" in message and "the whole AI_" in message
    assert fix in message and "task's label is VARCHAR" in message and "\n" not in message.strip()


def test_the_cli_refuses_such_a_seed_in_one_line_too(tmp_path: Path) -> None:
    rows = [(f"text {i}", "a" if i % 2 else "b") for i in range(8)]
    seed = "SELECT id, AI_CLASSIFY(text, ['a', 'b']) AS label FROM input\n"
    pack = text_pack(
        tmp_path, "whole", "A seed returning the whole object.", rows, seed, ["AI_CLASSIFY"], 30.0
    )
    result = run_cli("evolve", pack, "--budget", "1", "--db", tmp_path / "w.duckdb", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "the seed program is rejected" in line and "AI_CLASSIFY(...):labels[0]::string AS label" in line


# -- under the strict emulation of a Snowflake stored procedure --------------------------------------------------
snowpark = pytest.importorskip(
    "snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')"
)


@pytest.mark.slow
def test_in_snowflake_every_form_reads_the_users_id_column_and_passes_the_deploy_check() -> None:
    from snowpark_helpers import strict_session

    from coco_sql.engines.snowflake.store import SnowparkStore

    table = tickets()  # Snowflake folds the unquoted names to upper case; coco_task reads them as written
    with strict_session({"tickets": table}) as (session, _):
        session.call("coco_task", "tickets", "tickets", OPTIONS).collect()
        (summary,) = session.call("coco_evolve", "tickets", 0, {"seed": 1}).collect()
        evaluations = SnowparkStore(session, read_only=True).table_frame("evaluations")
        seen = recorded(evaluations, summary["CHAMPION_ID"])
        for form in ("snowflake_view", "snowflake_function", "dbt"):
            (exported,) = session.call("coco_export", 1, form).collect()
            code, findings = exported["CODE"], exported["FINDINGS"]
            assert findings in (None, "[]", []), (form, findings)
            assert "ticket_id AS id" in code, form
            got = answers(code, form, table, "ticket_id")
            assert {i: got[i] for i in seen} == seen, form
