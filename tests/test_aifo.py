"""Snowflake's AI-function optimizer side by side (issue 38, item 5): an AI_FUNCTION_OPTIMIZATION specification
read as a task (CLI `init aifo` and `CALL coco_task(..., {'spec': ...})`), its champion exported as CREATE AI
FUNCTION (sqlglot and check-deploy), and the `prompt_only` baseline that searches only what that optimizer
searches.

The specification and the function are the docs' own examples ("Optimize an AI function": "Compare models for
cost (balanced)"; "CREATE AI FUNCTION": "Classify support tickets"), verbatim. Their Cortex models answer through
the real OpenAI client from a scripted local endpoint (`llm_double.FakeEndpoint`, one reply per model): the
models keyword-match the ticket and copy the label of the most similar example in the prompt; the seed's model
ends its answer with a period (exact_match then fails), nano answers in lower case, haiku as asked."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import duckdb
import pytest
import sqlglot
import yaml
from llm_double import FakeEndpoint

import coco_sql
from coco_sql.engines.snowflake.aifo import parse_ai_function, parse_spec
from tests.conftest import run_cli

SPEC = """
function:
  function_name: "my_db.my_schema.classify_ticket(VARCHAR)"
metrics:
  - name: exact_match
dataset:
  name: my_db.my_schema.tickets_ds
  version: v1
  column_mapping:
    argument_mapping:
      body: ticket_body
    ground_truth: expected_label
optimization:
  models:
    - openai-gpt-5-nano
    - claude-haiku-4-5
  reflection_model: claude-sonnet-4-5
  strategy: balanced
  budget: medium
"""
FUNCTION = """CREATE OR REPLACE AI FUNCTION my_db.my_schema.classify_ticket(body VARCHAR)
  RETURNS VARCHAR
  AS $$
    AI_COMPLETE(
      'claude-sonnet-4-5',
      'Classify this support ticket into exactly one of: '
      || 'BILLING, BUG, FEATURE_REQUEST, OTHER. '
      || 'Return only the label.' || CHR(10) || body
    )::VARCHAR
  $$;
"""
ALIASES = {
    "claude-sonnet-4-5": "local/sonnet",
    "claude-haiku-4-5": "local/haiku",
    "openai-gpt-5-nano": "local/nano",
}
PHRASES = [
    ("I want a refund for my order", "BILLING"),
    ("you charged my card twice", "BILLING"),
    ("where is the invoice for march", "BILLING"),
    ("the app crashes on start", "BUG"),
    ("error 500 when saving a file", "BUG"),
    ("password reset fails every time", "BUG"),
    ("password reset link is broken", "BUG"),
    ("please add a dark mode", "FEATURE_REQUEST"),
    ("just saying hello to the team", "OTHER"),
    ("thanks for the quick help", "OTHER"),
]
RULES = (
    ("refund", "BILLING"),
    ("charge", "BILLING"),
    ("invoice", "BILLING"),
    ("crash", "BUG"),
    ("error", "BUG"),
)
RULES += (("please add", "FEATURE_REQUEST"),)
WORD = re.compile(r"[a-z]{3,}")


def answer(prompt: str) -> str:
    """A scripted model: the label of the prompt's most similar example (two shared words or more), else a
    keyword rule, else OTHER."""
    ticket = prompt.rsplit("\n", 1)[-1].lower()
    words = set(WORD.findall(ticket)) - {"the", "for", "ticket"}
    examples = re.findall(r"Input: (.*?)\nAnswer: (.*?)\n", prompt)
    shared, label = max(
        ((len(words & set(WORD.findall(t.lower()))), a) for t, a in examples), default=(0, "")
    )
    if shared >= 2:
        return label
    return next((label for word, label in RULES if word in ticket), "OTHER")


def model(transform: str) -> object:
    def reply(messages: Sequence[Mapping[str, str]]) -> str:
        text = answer(messages[-1]["content"])
        return {"period": text + ".", "lower": text.lower(), "plain": text}[transform]

    return reply


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEndpoint]:
    replies = {"sonnet": model("period"), "nano": model("lower"), "haiku": model("plain")}
    with FakeEndpoint(models=replies) as server:  # type: ignore[arg-type]
        monkeypatch.setenv("COCO_LOCAL_LLM_URL", server.base_url)
        yield server


def tickets_db(path: Path) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE tickets_ds (ticket_id INTEGER, ticket_body VARCHAR, expected_label VARCHAR)")
    rows = [(500 + i, f"ticket {i}: {PHRASES[i % 10][0]}", PHRASES[i % 10][1]) for i in range(40)]
    con.executemany("INSERT INTO tickets_ds VALUES (?, ?, ?)", rows)
    con.close()
    return path


def alias_flags() -> list[str]:
    return [flag for name, target in ALIASES.items() for flag in ("--model-alias", f"{name}={target}")]


@pytest.mark.slow
def test_the_docs_spec_runs_end_to_end_and_its_champion_is_a_checked_ai_function(
    tmp_path: Path, endpoint: FakeEndpoint
) -> None:
    db = tickets_db(tmp_path / "aifo.duckdb")
    (tmp_path / "spec.yaml").write_text(SPEC)
    (tmp_path / "classify_ticket.sql").write_text(FUNCTION)
    init = run_cli(
        "init", "aifo", "spec.yaml", "--db", db, "--function", "classify_ticket.sql",
        "--options", json.dumps({"id_column": "ticket_id"}), cwd=tmp_path,
    )  # fmt: skip
    assert init.returncode == 0, init.stderr
    assert init.stdout.startswith("task classify_ticket: 40 rows of tickets_ds (train 20, val 12, test 8)")
    assert "--mutator prompt_only" in init.stdout  # the like-for-like baseline, with the spec's budget
    evolve = run_cli("evolve", "classify_ticket", "--db", db, "--budget", "2", "--seed", "1", *alias_flags(),
                     "--quiet", "--json", cwd=tmp_path)  # fmt: skip
    assert evolve.returncode == 0, evolve.stderr
    summary = json.loads(evolve.stdout.strip().splitlines()[-1])
    # the model the spec offers, then examples in the prompt: the seed's answers end with a period
    assert summary["seed_val_score"] == 0.0 and summary["champion_val_score"] == 1.0, summary
    export = run_cli("export", "--db", db, "--form", "snowflake_ai_function", cwd=tmp_path)
    assert export.returncode == 0, export.stderr
    statement = export.stdout
    definition = parse_ai_function(
        "\n".join(line for line in statement.splitlines() if not line.startswith("--"))
    )
    assert definition.name == "my_db.my_schema.classify_ticket_coco"  # the original is never replaced
    assert definition.arguments == (("body", "VARCHAR"),) and definition.returns == "VARCHAR"
    body = sqlglot.parse_one(definition.body, read="snowflake")  # one scalar expression, over its argument
    assert {c.name for c in body.find_all(sqlglot.exp.Column)} == {"body"}
    assert "'claude-haiku-4-5'" in definition.body and "Examples:" in definition.body
    (tmp_path / "champion.sql").write_text(statement)
    check = run_cli(
        "check-deploy", "--db", db, "--program", "champion.sql", "--task", "classify_ticket", cwd=tmp_path
    )
    assert (check.returncode, check.stdout.strip()) == (0, "no findings"), check.stdout
    side_by_side = run_cli("export", "--db", db, "--form", "snowflake_experiment", cwd=tmp_path).stdout
    specs = re.findall(r"FROM SPECIFICATION \$\$\n(.*?)\n\$\$;", side_by_side, re.S)
    assert yaml.safe_load(specs[0]) == {  # the champion evaluated by Snowflake on the spec's data and metric
        "query_text": "my_db.my_schema.classify_ticket_coco(ticket_body)",
        "metrics": [{"name": "exact_match"}],
        "dataset": {"name": "my_db.my_schema.tickets_ds", "version": "v1", "ground_truth": "expected_label"},
    }
    assert parse_spec(specs[1]) == parse_spec(SPEC)  # and Snowflake's optimizer on the spec itself
    assert "EXECUTE EXPERIMENT my_db.my_schema.classify_ticket_opt;" in side_by_side
    assert (
        "-- CREATE OR REPLACE AI FUNCTION my_db.my_schema.classify_ticket_tuned(body VARCHAR)" in side_by_side
    )
    broken = statement.replace("AI_COMPLETE(", "AI_COMPLETE_TEXT(")
    (tmp_path / "broken.sql").write_text(broken)
    check = run_cli(
        "check-deploy", "--db", db, "--program", "broken.sql", "--task", "classify_ticket", cwd=tmp_path
    )
    assert check.returncode == 1 and "AI_COMPLETE_TEXT" in check.stdout


def test_call_coco_task_reads_the_same_spec_as_the_same_task(tmp_path: Path) -> None:
    db = tickets_db(tmp_path / "sql.duckdb")
    con = coco_sql.connect(db)
    row = con.execute(
        f"CALL coco_task('classify_ticket', 'tickets_ds', {{'spec': $spec${SPEC}$spec$, "
        f"'ai_function': $fn${FUNCTION}$fn$, 'id_column': 'ticket_id'}})"
    ).fetchone()
    assert row == ("classify_ticket", 40, 20, 12, 8)
    seed = con.execute(
        "SELECT options->>'seed_program' FROM tasks WHERE name = 'classify_ticket'"
    ).fetchone()[0]
    assert "ticket_body" in seed and "'claude-sonnet-4-5'" in seed  # the body over the dataset's column
    help_rows = con.execute("FROM coco_help('coco_task spec')").fetchall()
    assert [r[0] for r in help_rows] == ["spec", "ai_function"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("budget: medium", "budget: medium\n  mode: fast"), "optimization.mode: is not supported"),
        (("strategy: balanced", "stratgy: balanced"), "optimization.stratgy: unknown key"),
        (("- name: exact_match", "- name: llm_judge"), "metrics.name: coco-sql scores exact_match"),
        (("budget: medium", "budget: huge"), "optimization.budget: must be one of auto, ultra-light"),
        (("    - claude-haiku-4-5\n", ""), None),  # one model is fine
        (
            ("classify_ticket(VARCHAR)", "classify_ticket(NUMBER)"),
            "defines my_db.my_schema.classify_ticket(VARCHAR)",
        ),
        (("ground_truth: expected_label", "ground_truth: label_x"), "'label_x'"),
    ],
)
def test_a_spec_coco_sql_cannot_take_is_refused_in_one_line_naming_the_field(
    tmp_path: Path, change: tuple[str, str], problem: str | None
) -> None:
    db = tickets_db(tmp_path / "bad.duckdb")
    con = coco_sql.connect(db)
    spec = SPEC.replace(*change)
    call = (
        f"CALL coco_task('t', 'tickets_ds', {{'spec': $s${spec}$s$, 'ai_function': $f${FUNCTION}$f$, "
        "'id_column': 'ticket_id'})"
    )
    if problem is None:
        con.execute(call)
        return
    with pytest.raises(duckdb.Error) as raised:
        con.execute(call)
    message = str(raised.value)
    assert problem in message and "\n" not in message.strip(), message


def test_a_function_name_spec_without_the_function_says_what_to_give(tmp_path: Path) -> None:
    db = tickets_db(tmp_path / "nofn.duckdb")
    con = coco_sql.connect(db)
    with pytest.raises(duckdb.Error, match="give its CREATE AI FUNCTION statement as option 'ai_function'"):
        con.execute(f"CALL coco_task('t', 'tickets_ds', {{'spec': $s${SPEC}$s$, 'id_column': 'ticket_id'}})")


def outside_ai_calls(code: str) -> str:
    """The program's SQL with each AI call replaced by a placeholder: what `prompt_only` must never change."""
    tree = sqlglot.parse_one(code, read="snowflake")
    for node in list(tree.find_all(sqlglot.exp.Anonymous, sqlglot.exp.AIClassify)):
        if node.sql_name().upper().startswith("AI_") or str(node.name).upper().startswith("AI_"):
            node.replace(sqlglot.exp.Literal.string("<call>"))
    return tree.sql(dialect="snowflake")


def prompt_only_run(db: Path) -> list[tuple[str, str]]:
    con = coco_sql.connect(db)
    con.execute(
        f"CALL coco_task('t', 'tickets_ds', {{'spec': $s${SPEC}$s$, 'ai_function': $f${FUNCTION}$f$, "
        "'id_column': 'ticket_id'})"
    )
    options = {"seed": 3, "mutator": "prompt_only", "model_aliases": ALIASES}
    con.execute("FROM coco_evolve('t', 3, ?::JSON)", [json.dumps(options)]).fetchall()
    programs = con.execute("SELECT program_id, code FROM programs ORDER BY program_id").fetchall()
    con.close()
    return programs


@pytest.mark.slow
def test_prompt_only_changes_only_the_calls_prompt_and_model_and_a_seed_fixes_it(
    tmp_path: Path, endpoint: FakeEndpoint
) -> None:
    first = prompt_only_run(tickets_db(tmp_path / "a.duckdb"))
    again = prompt_only_run(tickets_db(tmp_path / "b.duckdb"))
    assert first == again and len(first) == 4
    seed = first[0][1]
    assert all(outside_ai_calls(code) == outside_ai_calls(seed) for _, code in first)
    calls = [code.count("AI_COMPLETE(") for _, code in first]
    assert calls == [1] * 4  # never a second AI call
    assert any("'claude-haiku-4-5'" in code for _, code in first[1:])  # the spec's models are tried


def test_a_function_body_spec_needs_no_definition_and_its_champion_is_an_ai_function_of_the_task(
    tmp_path: Path, endpoint: FakeEndpoint
) -> None:
    body = "AI_COMPLETE('claude-haiku-4-5', 'Label this ticket: ' || CHR(10) || text)::VARCHAR"
    spec = SPEC.replace(
        'function_name: "my_db.my_schema.classify_ticket(VARCHAR)"', f'function_body: "{body}"'
    )
    spec = spec.replace("body: ticket_body", "text: ticket_body")
    db = tickets_db(tmp_path / "body.duckdb")
    con = coco_sql.connect(db)
    con.execute(
        f"CALL coco_task('by_body', 'tickets_ds', {{'spec': $s${spec}$s$, 'id_column': 'ticket_id'}})"
    )
    options = json.dumps({"seed": 1, "model_aliases": ALIASES})
    con.execute("FROM coco_evolve('by_body', 0, ?::JSON)", [options]).fetchall()
    code = con.execute("SELECT code FROM coco_export(1, 'snowflake_ai_function')").fetchone()[0]
    definition = parse_ai_function("\n".join(x for x in code.splitlines() if not x.startswith("--")))
    assert (definition.name, definition.arguments) == ("coco_by_body_champion", (("text", "VARCHAR"),))
    assert "|| text" in definition.body.replace("\n", " ")  # the dataset's column read as the argument again


def test_in_snowflake_coco_task_reads_the_spec_under_the_strict_emulation(tmp_path: Path) -> None:
    pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')")
    from snowpark_helpers import strict_session

    rows = duckdb.connect(str(tickets_db(tmp_path / "sf.duckdb"))).execute("FROM tickets_ds").df()
    options = {"spec": SPEC, "ai_function": FUNCTION, "id_column": "ticket_id"}
    with strict_session({"tickets_ds": rows}) as (session, _):
        (row,) = session.call("coco_task", "classify_ticket", "tickets_ds", options).collect()
        assert tuple(row) == ("classify_ticket", 40, 20, 12, 8)
        bad = {
            **options,
            "spec": SPEC.replace("budget: medium", "budget: medium\n  validation_fraction: 0.3"),
        }
        with pytest.raises(Exception, match=r"optimization.validation_fraction: is not supported"):
            session.call("coco_task", "classify_ticket2", "tickets_ds", bad).collect()
