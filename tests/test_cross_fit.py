"""Stored training scores are cross-fitted (issue 15, part 4): a program that holds training rows as few-shot
examples does not grade those rows against themselves in `program_scores` or `evaluations`. Real embedded model,
real DuckDB, real loop."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import sqlglot
from pack_copies import small_pack

from coco_sql import api
from coco_sql.evaluate import Evaluator
from coco_sql.languages.sql.mutate.proxy_edits import plan, proxy_ctes, with_proxy
from coco_sql.tasks import load_task


def all_examples_program(pack_dir: Path) -> str:
    """hotpotqa_type's seed with every training row as a few-shot example."""
    train = load_task(pack_dir).split("train")
    examples = ", ".join(
        f"{{'input': {_quote(text)}, 'labels': {_quote(train.expected[str(i)])}}}"
        for i, text in zip(train.inputs["id"], train.inputs["question"], strict=True)
    )
    return (
        "SELECT id, AI_CLASSIFY(question, ['bridge', 'comparison'], "
        f"{{'examples': [{examples}]}}):labels[0]::string AS label FROM input"
    )


def stored_train_score(con: duckdb.DuckDBPyConnection, run_id: int) -> float:
    """The seed's training score as the run stored it (`program_scores`)."""
    return con.execute(
        "SELECT score FROM program_scores WHERE run_id = ? AND split = 'train'", [run_id]
    ).fetchone()[0]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@pytest.mark.slow
def test_an_all_examples_program_is_not_scored_on_its_own_examples(tmp_path: Path) -> None:
    pack_dir = small_pack(tmp_path, "hotpotqa_type", pool_rows=150)
    code = all_examples_program(pack_dir)
    (pack_dir / "seed.sql").write_text(code, encoding="utf-8")
    pack = load_task(pack_dir)
    own = Evaluator(pack).evaluate(code, "train")
    assert own.ok and own.score > 0.97  # each example answers for itself: the number this test must not store

    db = tmp_path / "runs.duckdb"
    summary = api.evolve(pack, db=db, budget=0, options={"seed": 1})
    with duckdb.connect(str(db), read_only=True) as con:
        stored = stored_train_score(con, summary.run_id)
        rows = con.execute(
            "SELECT instance_id, score, output FROM evaluations WHERE run_id = ? AND split = 'train'",
            [summary.run_id],
        ).fetchall()
    assert len(rows) == len(own.ids)
    assert stored < own.score - 0.05  # out of fold, some example rows are answered wrongly
    assert stored == sum(score for _, score, _ in rows) / len(rows)
    wrong = [i for i, score, _ in rows if score < 1.0]
    assert wrong and all(json.loads(out) is not None for i, _, out in rows if i in wrong)
    # validation rows are never examples: their score is the program's own
    assert summary.champion_val_score == Evaluator(pack).evaluate(code, "val").score


def test_a_program_without_examples_keeps_its_own_training_outcome(tmp_path: Path) -> None:
    pack_dir = small_pack(tmp_path, "hotpotqa_type", pool_rows=60)
    pack = load_task(pack_dir)
    own = Evaluator(pack).evaluate(pack.seed_program, "train")
    db = tmp_path / "runs.duckdb"
    summary = api.evolve(pack, db=db, budget=0, options={"seed": 1})
    with duckdb.connect(str(db), read_only=True) as con:
        stored = stored_train_score(con, summary.run_id)
    assert stored == own.score


@pytest.mark.slow
def test_a_proxy_program_with_examples_is_cross_fitted_too(tmp_path: Path) -> None:
    """The proxy's CTEs do not survive the mutator's DuckDB round trip; the variants keep them as written."""
    pack_dir = small_pack(tmp_path, "hotpotqa_type", pool_rows=150)
    query = sqlglot.parse_one(all_examples_program(pack_dir), read="snowflake")
    where = plan(query, 0, "snowflake")
    assert where is not None
    ctes = proxy_ctes(where, "label", multi=False, model="snowflake-arctic-embed-m-v1.5")
    code = with_proxy(where, ctes, 0.99, "snowflake")(query).sql(dialect="snowflake", pretty=True)
    (pack_dir / "seed.sql").write_text(code, encoding="utf-8")
    pack = load_task(pack_dir)
    own = Evaluator(pack).evaluate(code, "train")
    assert own.ok and own.score > 0.95
    db = tmp_path / "runs.duckdb"
    summary = api.evolve(pack, db=db, budget=0, options={"seed": 1})
    with duckdb.connect(str(db), read_only=True) as con:
        stored = stored_train_score(con, summary.run_id)
        errors = con.execute(
            "SELECT count(*) FROM evaluations WHERE run_id = ? AND split = 'train' AND error IS NOT NULL",
            [summary.run_id],
        ).fetchone()[0]
    assert stored < own.score - 0.05
    assert errors == 0  # each example row answered by a variant that runs, not by a failed one
