"""The mutator's live tools (CoCoEvolve E_0): query, show_draft and check see TRAINING rows only."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from coco_sql.errors import ConfigError, EvaluationError
from coco_sql.evaluate import Evaluator
from coco_sql.reflect import DraftEnvironment
from coco_sql.tasks import load_task
from tests.conftest import run_cli


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


@pytest.mark.slow
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
        return run_cli(*args, cwd=tmp_path)

    done = cli("env", "lockpicking6", "query", "--sql", "SELECT COUNT(*) AS n FROM input")
    assert done.returncode == 0 and json.loads(done.stdout)["rows"] == [[50]]
    program = tmp_path / "p.sql"
    program.write_text("SELECT id, 2 AS label FROM input")
    shown = json.loads(cli("env", "lockpicking6", "show-draft", "--program", str(program), "-n", "3").stdout)
    assert len(shown["rows"]) == 3
    failed = cli("env", "lockpicking6", "query", "--sql", "DELETE FROM input")
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1 and "one SELECT" in failed.stderr


# -- the same tools when the warehouse runs the candidates (issue 27) -------------------------------------------
WAREHOUSE_PROBES = {
    "the training rows": "SELECT id, question FROM input ORDER BY id",
    "a scope probe with a bound AI call's CTE": (
        "WITH e AS (SELECT id, AI_EMBED(to_json(''), to_json(question)) AS v FROM input) "
        "SELECT input.id, e.v FROM input JOIN e ON e.id = input.id ORDER BY 1"
    ),
    "the examples' embeddings (ai_pipeline.embeddings)": (
        "SELECT CAST((question) AS VARCHAR), AI_EMBED(to_json(''), to_json(CAST((question) AS VARCHAR))) "
        "FROM (SELECT * FROM input) AS s ORDER BY 1"
    ),
    "a cascade's similarities (ai_pipeline.with_similarities)": (
        "SELECT CAST(id AS VARCHAR), AI_SIMILARITY(to_json(CAST((question) AS VARCHAR)), "
        "to_json('comparison: two things compared'), NULL) FROM (SELECT * FROM input) AS s ORDER BY 1"
    ),
    "a quoted column, as DuckDB reads it": 'SELECT "id", upper("question") AS "q" FROM input ORDER BY 1',
}


@pytest.fixture(scope="module")
def both_engines(tmp_path_factory: pytest.TempPathFactory):
    """hotpotqa_type's first 30 rows, its training split probed in the DuckDB sandbox and on a warehouse (a
    Snowpark local-testing session: Snowflake SQL over the staged rows, Cortex answered by a local stand-in)."""
    pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed")
    from pack_copies import small_pack
    from snowflake.snowpark import Session

    from coco_sql.engines.snowflake.store import SnowparkStore
    from coco_sql.languages.sql import SqlLanguage

    task = load_task(small_pack(tmp_path_factory.mktemp("packs"), "hotpotqa_type", 30, 4))
    session = Session.builder.config("local_testing", True).create()
    local = Evaluator(task)
    remote = Evaluator(task, language=SqlLanguage(task, SnowparkStore(session).candidate_engine()))
    yield DraftEnvironment(local), DraftEnvironment(remote)
    local.close()
    remote.close()
    session.close()


@pytest.mark.parametrize("probe", WAREHOUSE_PROBES, ids=WAREHOUSE_PROBES)
def test_a_warehouse_answers_the_mutators_probes_as_the_sandbox_does(both_engines, probe: str) -> None:
    local, remote = both_engines
    expected, found = local.probe(WAREHOUSE_PROBES[probe]), remote.probe(WAREHOUSE_PROBES[probe])
    assert len(found.rows) == len(expected.rows) > 0
    for mine, theirs in zip(found.rows, expected.rows, strict=True):
        assert len(mine) == len(theirs)
        for a, b in zip(mine, theirs, strict=True):
            assert a == (pytest.approx(b, abs=1e-6) if isinstance(b, float | list) else b)


def test_a_warehouse_probe_reads_only_the_training_rows(both_engines) -> None:
    """On a warehouse other tables exist (the run's, the user's source): a probe may read its split's rows only,
    and the in-engine scoring SQL, DuckDB's own, is not sent there (its Python twin scores instead)."""
    local, remote = both_engines
    for sql in (
        "SELECT * FROM programs",
        "SELECT * FROM input JOIN main.task_rows ON TRUE",
        "DROP TABLE input",
    ):
        with pytest.raises(EvaluationError, match=r"may read only (example_vectors, )?examples, input|one SELECT"):
            remote.probe(sql)
    assert local.labels_sql() is not None and remote.labels_sql() is None
