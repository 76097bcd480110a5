"""The mutator's live tools (CoCoEvolve E_0): query, show_draft and check see TRAINING rows only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coco_sql.errors import ConfigError, EvaluationError
from coco_sql.evaluate import Evaluator
from coco_sql.reflect import DraftEnvironment
from coco_sql.tasks import load_task


@pytest.fixture(scope="module")
def goemotions_env():
    task = load_task("goemotions")
    evaluator = Evaluator(task)
    yield task, DraftEnvironment(evaluator)
    evaluator.close()


def hidden(task) -> tuple[set[str], set[str]]:
    """Ids and texts of the validation and test rows: none may reach the mutator's tools."""
    ids: set[str] = set()
    texts: set[str] = set()
    for split in ("val", "test"):
        data = task.split(split)
        ids |= set(data.expected)
        texts |= set(data.inputs["text"])
    return ids, texts


def test_query_sees_exactly_the_training_rows(goemotions_env) -> None:
    task, env = goemotions_env
    train = task.split("train")
    result = env.query("SELECT id, text FROM input ORDER BY id", limit=10_000)
    assert [row[0] for row in result["rows"]] == sorted(train.expected)
    hidden_ids, _ = hidden(task)
    assert not {row[0] for row in result["rows"]} & hidden_ids
    # Exactly the training texts come back (a val or test comment may equal a training one, e.g. "Thank you!",
    # so texts are compared as the training split's multiset, not searched for).
    assert sorted(row[1] for row in result["rows"]) == sorted(train.inputs["text"])
    assert env.query("SELECT COUNT(*) FROM input")["rows"] == [[len(train.expected)]]


def test_query_refuses_writes_and_other_sources(goemotions_env) -> None:
    _, env = goemotions_env
    for sql in (
        "DROP TABLE input",
        "SELECT 1; SELECT 2",
        "SELECT * FROM read_csv('tasks/goemotions/data/test.csv')",
    ):
        with pytest.raises(EvaluationError):
            env.query(sql)


def test_show_draft_shows_at_most_ten_training_rows_failures_first() -> None:
    task = load_task("lockpicking6")
    evaluator = Evaluator(task)
    env = DraftEnvironment(evaluator)
    shown = env.show_draft(task.seed_program)
    assert shown["train_score"] == pytest.approx(0.02)
    assert len(shown["rows"]) == 10 and all(r["score"] == 0.0 for r in shown["rows"])
    assert all(r["expected"] is not None and r["output"] is not None for r in shown["rows"])
    picked = env.show_draft(task.seed_program, ["lp003", "lp001"])
    assert [r["id"] for r in picked["rows"]] == ["lp003", "lp001"]
    with pytest.raises(ConfigError, match="no training instance 'lt0001'"):
        env.show_draft(task.seed_program, ["lt0001"])  # a test row: refused like an unknown id
    assert env.check("SELECT id, 1 AS label FROM input") is None
    assert "GETENV" in (env.check("SELECT id, getenv('HOME') AS label FROM input") or "")
    evaluator.close()


def test_env_cli_prints_json_and_one_line_errors(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "coco_sql.cli", *args], capture_output=True, text=True, timeout=60
        )

    done = cli("env", "lockpicking6", "query", "--sql", "SELECT COUNT(*) AS n FROM input")
    assert done.returncode == 0 and json.loads(done.stdout)["rows"] == [[50]]
    program = tmp_path / "p.sql"
    program.write_text("SELECT id, 2 AS label FROM input")
    shown = json.loads(cli("env", "lockpicking6", "show-draft", "--program", str(program), "-n", "3").stdout)
    assert len(shown["rows"]) == 3
    failed = cli("env", "lockpicking6", "query", "--sql", "DELETE FROM input")
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1 and "one SELECT" in failed.stderr
