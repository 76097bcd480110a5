"""Every parser that reads a candidate has depth and time bounds (issue 37): deep YAML, deep JSON, deep or huge
SQL, deep Python and endless Jinja are each one line, within the evaluation's deadline, never a traceback; and
``--json`` always ends stdout with one JSON object, a rejection or a usage error included."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from coco_sql import bounded
from coco_sql.errors import CandidateRejected
from coco_sql.sqlkit.bounds import SqlBounds, check_text, check_tree, parse_bounded
from coco_sql.tasks.coerce import coerce_outputs
from tests.conftest import run_cli

DEEP_PARENS = "(" * 2_000 + "1" + ")" * 2_000
TSP_ENTRY = "def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):\n"
TSP_RETURN = "    return unvisited_nodes[0]\n"
OR_CHAIN = (
    "select id, case when " + " or ".join(["code = 'x'"] * 3_000) + " then 1 else 0 end as label from input"
)


def eval_cli(tmp_path: Path, task: str, program: str, suffix: str) -> tuple[dict, str, float]:
    """`coco-sql eval TASK --program FILE --json`: (its last stdout line as JSON, its stderr, seconds)."""
    path = tmp_path / f"program{suffix}"
    path.write_text(program)
    start = time.monotonic()
    done = run_cli("eval", task, "--program", path, "--json", "--db", tmp_path / "x.duckdb", cwd=tmp_path)
    elapsed = time.monotonic() - start
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr, elapsed


@pytest.mark.parametrize(
    ("task", "suffix", "program", "message"),
    [
        ("lockpicking6", ".sql", f"select id, {DEEP_PARENS} as label from input", "nests brackets or CASE"),
        (
            "lockpicking6",
            ".sql",
            "select id, " + "not " * 3_000 + "true as label from input",
            "nested too deeply",
        ),
        ("lockpicking6", ".sql", OR_CHAIN, "chains more than 1000 terms"),
        (
            "tsp_construct",
            ".py",
            TSP_ENTRY + "    x = " + "-" * 40_000 + "1\n" + TSP_RETURN,
            "nests expressions",
        ),
        (
            "tsp_construct",
            ".py",
            TSP_ENTRY + "    x = " + "a." * 10_000 + "b\n" + TSP_RETURN,
            "nests expressions",
        ),
        ("dabstep", ".yml", "tools: " + "[" * 5_000 + "]" * 5_000 + "\n", "nested deeper than 64 levels"),
    ],
    ids=[
        "sql-parens",
        "sql-not-chain",
        "sql-or-chain",
        "python-unary",
        "python-attributes",
        "agent-spec-yaml",
    ],
)
def test_a_deep_candidate_is_one_line_in_the_cli(
    tmp_path: Path, task: str, suffix: str, program: str, message: str
) -> None:
    result, stderr, elapsed = eval_cli(tmp_path, task, program, suffix)
    assert message in result["error"] and message in stderr
    assert result["score"] == 0.0 and elapsed < 30.0  # every pack's deadline is longer


def test_sql_bounds_are_checked_before_and_after_the_parse() -> None:
    small = SqlBounds(max_chars=100, max_tokens=20, max_nesting=3, max_nodes=30, max_depth=10)
    with pytest.raises(CandidateRejected, match="101 characters"):
        check_text("x" * 101, "duckdb", small)
    with pytest.raises(CandidateRejected, match="tokens"):
        check_text("select " + ", ".join("1" * 12), "duckdb", small)
    with pytest.raises(CandidateRejected, match="more than 3 levels deep"):
        check_text("select ((((1))))", "duckdb", small)
    cases = "select " + "case when " * 4 + "1" + " then 1 end" * 4
    with pytest.raises(CandidateRejected, match="more than 3 levels deep"):  # CASE ... END counts as a level
        check_text(cases, "duckdb", SqlBounds(max_nesting=3))
    [tree] = parse_bounded("select 1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11", "duckdb")
    with pytest.raises(CandidateRejected, match="chains more than 10 terms"):
        check_tree(tree, small)
    # a string literal's brackets are not nesting
    assert parse_bounded("select '" + "(" * 500 + "' as x", "duckdb")


def test_yaml_bounds() -> None:
    with pytest.raises(CandidateRejected, match="nested deeper than 64 levels"):
        bounded.load_yaml("f.yml", "a: " + "[" * 100 + "]" * 100)
    layers = zip("abcdefgh", "bcdefghi", strict=True)
    bomb = "a: &a [x, x]\n" + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}]\n" for p, c in layers)
    with pytest.raises(CandidateRejected, match="expands to more than 100,000 values"):
        bounded.load_yaml("f.yml", bomb)
    with pytest.raises(CandidateRejected, match="line 2: anchors and aliases"):
        bounded.load_yaml("f.yml", "a: &x [1]\nb: *x\n", allow_aliases=False)
    with pytest.raises(CandidateRejected, match=r"f\.yml: nested deeper than 64 levels"):  # PyYAML's parser
        bounded.load_yaml("f.yml", "[" * 5_000 + "]" * 5_000, allow_aliases=False)


def test_json_from_a_candidate_is_bounded() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ValueError, match="nested deeper than 64 levels"):
        bounded.json_value(deep)
    with pytest.raises(CandidateRejected, match=r"answer\.json: nested deeper"):
        bounded.loads_json("answer.json", deep)
    assert bounded.json_value('["[[[[", {"a": "]]]"}]') == ["[[[[", {"a": "]]]"}]
    # a program whose output is a deep JSON array: a row error, not a RecursionError in the evaluator
    values, failures = coerce_outputs([deep, '["a", "b"]'], "VARCHAR[]")
    assert values[1] == ["a", "b"] and "malformed JSON array" in failures[0]


# ------------------------------------------------------------------------------------------------- --json


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["eval", "lockpicking6", "--program", "{empty}", "--json"], "ConfigError"),  # the case
        (["eval", "lockpicking6", "--json"], "usage"),  # a required argument missing
        (["eval", "no_such_task", "--program", "{empty}", "--json"], "ConfigError"),
        (["cost", "--db", "{missing}", "--json"], "StoreError"),
        (["sql", "select * from nope", "--db", "{missing}", "--json"], "StoreError"),
        (["check-deploy", "--program", "{missing}", "--task", "lockpicking6", "--json"], "ConfigError"),
        (["evolve", "no_such_task", "--json", "--db", "{missing}"], "TaskError"),
        (["resume", "--run", "7", "--db", "{missing}", "--json"], "StoreError"),
    ],
)
def test_json_output_ends_with_one_json_object_for_a_rejection_too(
    tmp_path: Path, argv: list[str], kind: str
) -> None:
    empty = tmp_path / "empty.sql"
    empty.write_text("\n")
    argv = [a.format(empty=empty, missing=tmp_path / "missing.duckdb") for a in argv]
    done = run_cli(*argv, cwd=tmp_path)
    assert done.returncode == 2
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert last["kind"] == kind and last["error"] and "\n" not in last["error"]
    assert "Traceback" not in done.stderr
