"""The centroid head (issue 26): a nearest-centroid classifier written as SQL over the `examples` table, leave-one-out
on the training rows, offered as a part of the proxy or as the whole of it. Real embedded model, real DuckDB sandbox,
real validator and deploy check."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import sqlglot
from proxy_setting import MODEL, SEED, proxy_setting

from coco_sql import api
from coco_sql.languages.sql.mutate.ai_edits import TrainingView
from coco_sql.languages.sql.mutate.centroid_head import centroid_cosines, head_probabilities
from coco_sql.languages.sql.mutate.head_edits import head_edits, read_plan
from coco_sql.languages.sql.mutate.proxy_edits import (
    plan,
    predictions,
    prototype_vectors,
    proxy_ctes,
    proxy_edits,
    with_proxy,
    written_genes,
    written_proxy,
)
from coco_sql.languages.sql.mutate.proxy_fit import ProxyGenes, answers, fit, fit_scores, probabilities
from coco_sql.reflect import DraftEnvironment

LABELS = ["bridge", "comparison"]


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory):
    yield from proxy_setting(tmp_path_factory.mktemp("packs"))


def _numpy(view: TrainingView, env: DraftEnvironment, genes: ProxyGenes) -> tuple[np.ndarray, np.ndarray]:
    """numpy's leave-one-out p of `genes` on the training rows, and the rows' vectors."""
    where = plan(sqlglot.parse_one(SEED, read="snowflake"), 0, "snowflake")
    assert where is not None
    x = np.stack([view.vectors[r.text] for r in view.rows])
    similarity = x @ x.T
    np.fill_diagonal(similarity, -np.inf)
    example_labels = np.array([[label in r.gold for label in LABELS] for r in view.rows], float)
    prototypes = prototype_vectors(env, [text for _, text in where.categories])
    assert prototypes is not None
    by_head = head_probabilities(centroid_cosines(x @ x.T, example_labels), genes.tau_head)
    return probabilities(similarity, x @ prototypes.T, example_labels, genes, None, by_head), x


def test_centroid_cosines_leave_each_row_out() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(9, 5))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = np.zeros((9, 3))
    y[np.arange(9), [0, 0, 0, 1, 1, 1, 2, 2, 0]] = 1.0
    y[4, 2] = 1.0  # a row with two labels
    y[6, 2] = 0.0  # label 2 then has rows 4 and 7 only
    y[6, 0] = 1.0
    found = centroid_cosines(x @ x.T, y)
    for i in range(9):
        for c in range(3):
            others = [j for j in range(9) if j != i and y[j, c]]
            if not others:
                assert np.isnan(found[i, c])
                continue
            centroid = x[others].sum(axis=0)
            assert found[i, c] == pytest.approx(x[i] @ centroid / np.linalg.norm(centroid))


@pytest.mark.parametrize("head_weight", [1.0, 0.5])
def test_the_sql_head_computes_what_numpy_does_leaving_each_row_out(setting, head_weight) -> None:
    _, _, env, query, view = setting
    where = plan(query, 0, "snowflake")
    assert where is not None
    genes = ProxyGenes(k=10, tau=0.02, head_weight=head_weight, tau_head=0.01)
    p, _ = _numpy(view, env, genes)
    ctes = proxy_ctes(where, "label", False, MODEL, genes)
    assert ("proxy_nn" in ctes) == (head_weight < 1) and "proxy_head" in ctes  # only the parts it weighs
    found = predictions(env, where, ctes)
    assert found is not None and set(found) == {r.instance_id for r in view.rows}
    expected = dict(zip((r.instance_id for r in view.rows), answers(p, LABELS, 1.0), strict=True))
    assert sum(found[i][0] == expected[i] for i in found) >= len(found) - 1  # a float tie at most
    for row, top in zip(view.rows, p.max(axis=1), strict=True):
        assert found[row.instance_id][1] == pytest.approx(top, abs=1e-4)  # float32 vectors


def test_the_heads_training_answers_are_out_of_fold(setting) -> None:
    """A training row's answer is the one the head gives when the row is not in the table: its centroid does not
    hold it, so the stored train score is not inflated."""
    _, _, env, query, view = setting
    where = plan(query, 0, "snowflake")
    assert where is not None
    genes = ProxyGenes(head_weight=1.0, tau_head=0.01)
    found = predictions(env, where, proxy_ctes(where, "label", False, MODEL, genes))
    assert found is not None
    x = np.stack([view.vectors[r.text] for r in view.rows])
    y = np.array([[label in r.gold for label in LABELS] for r in view.rows], float)
    held_out, in_sample = [], []
    for i in range(len(view.rows)):
        rest = np.arange(len(view.rows)) != i
        with_row = (y.T @ x) / np.linalg.norm(y.T @ x, axis=1, keepdims=True)
        without = (y[rest].T @ x[rest]) / np.linalg.norm(y[rest].T @ x[rest], axis=1, keepdims=True)
        held_out.append(LABELS[int(np.argmax(without @ x[i]))])
        in_sample.append(LABELS[int(np.argmax(with_row @ x[i]))])
    sql = [found[r.instance_id][0][0] for r in view.rows]
    assert sum(a == b for a, b in zip(sql, held_out, strict=True)) >= len(sql) - 1
    gold = [r.gold[0] for r in view.rows]
    honest = np.mean([a == g for a, g in zip(sql, gold, strict=True)])
    assert honest <= np.mean([a == g for a, g in zip(in_sample, gold, strict=True)])


def test_the_fit_scores_the_head_after_the_grid(setting) -> None:
    _, _, env, query, view = setting
    where = plan(query, 0, "snowflake")
    assert where is not None
    prototypes = prototype_vectors(env, [text for _, text in where.categories])
    assert prototypes is not None
    scored = fit(view.rows, view.vectors, prototypes, LABELS, multi_label=False)
    rate = fit_scores(view.rows, view.vectors, prototypes, LABELS)
    assert rate is not None
    keys = [rate(g).key(False) for g, _ in scored]
    assert keys == sorted(keys)  # best first by the fit's key (Brier for one label per row)
    base = min((g for g, _ in scored if g.head_weight == 0), key=lambda g: rate(g).key(False))
    heads = [g for g, _ in scored if g.head_weight > 0]
    # mixed into the grid's best (not into the words alone), and alone
    assert {g.head_weight for g in heads} == ({1.0} if base.word_weight == 1 else {0.25, 0.5, 0.75, 1.0})
    for g in heads:
        assert g.head_weight == 1 or replace(g, head_weight=0.0, tau_head=base.tau_head) == base
    if scored[0][0].head_weight > 0:  # the head is chosen only when it ranks strictly better
        assert rate(scored[0][0]).key(False) < rate(base).key(False)


def test_a_head_program_runs_passes_the_deploy_check_and_costs_what_the_proxy_does(setting) -> None:
    pack, evaluator, _, query, _ = setting
    where = plan(query, 0, "snowflake")
    assert where is not None

    def billed(genes: ProxyGenes) -> dict[str, int]:
        """The program's AI calls' tokens on the validation rows, per function (what the deploy cost counts)."""
        ctes = proxy_ctes(where, "label", False, MODEL, genes)
        code = with_proxy(where, ctes, 0.0, "snowflake", [])(query).sql(dialect="snowflake", pretty=True)
        assert "VECTOR_COSINE_SIMILARITY" in code and "FROM examples AS proxy_e_rows" in code
        assert api.check_deploy(db="unused.duckdb", code=code, task=pack) == []
        outcome = evaluator.evaluate(code, "val")
        assert outcome.ok and outcome.score > 0.5, outcome.error
        lines = outcome.usage.lines.items()
        return {f: x.input_tokens + x.cached_input_tokens + x.output_tokens for (f, _), x in lines if x.calls}

    plain = billed(ProxyGenes())
    assert plain and not any("CLASSIFY" in f for f in plain)  # the proxy answers every row
    # the head embeds nothing the proxy does not: no higher deploy cost (a few tokens less where a chunk's
    # identical texts fall differently); alone it does not embed the categories either
    for genes in (ProxyGenes(head_weight=0.5), ProxyGenes(word_weight=0.5, head_weight=0.25)):
        mixed = billed(genes)
        assert (
            mixed.keys() == plain.keys()
            and 0.99 * plain["AI_EMBED"] <= mixed["AI_EMBED"] <= plain["AI_EMBED"]
        )
    alone = billed(ProxyGenes(head_weight=1.0))
    assert alone.keys() == plain.keys() and alone["AI_EMBED"] < plain["AI_EMBED"]


def test_head_edits_give_a_proxy_without_one_the_head(setting) -> None:
    _, evaluator, env, query, view = setting
    alone = next(e for e in proxy_edits(query, {0: view}, env, False) if "answer every row" in e.approach)
    genes = written_genes(written_proxy(alone.apply(query).sql(dialect="snowflake"), "snowflake"))  # type: ignore[arg-type]
    assert genes is not None
    # a proxy without the head, as a parent that predates heads: the edits add it, as a part and alone
    where = plan(query, 0, "snowflake")
    assert where is not None
    plain = ProxyGenes(k=genes.k, tau=genes.tau, example_weight=genes.example_weight, word_weight=0.0)
    parent = with_proxy(where, proxy_ctes(where, "label", False, MODEL, plain), 0.0, "snowflake", [])(query)
    code = parent.sql(dialect="snowflake", pretty=True)
    proxy = written_proxy(code, "snowflake")
    assert proxy is not None and read_plan(proxy, "snowflake") is not None
    edits = head_edits(proxy, {0: view}, env, multi_label=False)
    assert [e.operator for e in edits] == ["centroid_head", "centroid_head"]
    children = []
    for edit in edits:
        child = edit.apply(sqlglot.parse_one(code, read="snowflake")).sql(dialect="snowflake", pretty=True)
        head = written_genes(written_proxy(child, "snowflake"))  # type: ignore[arg-type]
        assert head is not None and head.head_weight > 0 and "proxy_head" in child
        assert (
            child.split("SELECT\n  input.id")[-1] == code.split("SELECT\n  input.id")[-1]
        )  # the query as it was
        outcome = evaluator.evaluate(child, "train")
        assert outcome.ok, outcome.error
        children.append(head.head_weight)
    assert children[0] < 1 == children[1]
    # a proxy that is the head alone gets no head edit
    assert head_edits(written_proxy(child, "snowflake"), {0: view}, env, multi_label=False) == []


def test_head_genes_read_back_and_step() -> None:
    genes = ProxyGenes(k=40, head_weight=0.5, tau_head=0.02)
    assert ProxyGenes.read(sqlglot.parse_one(genes.sql(), read="snowflake")) == genes
    assert "head_weight" not in ProxyGenes().sql()  # a proxy without a head is written as before heads
    assert ProxyGenes.read(sqlglot.parse_one(ProxyGenes(k=40).sql(), read="snowflake")) == ProxyGenes(k=40)
    steps = genes.neighbours(multi_label=False, examples=60)
    assert {s.head_weight for s in steps} == {0.25, 0.5, 0.75} and {s.tau_head for s in steps} == {
        0.01,
        0.02,
        0.04,
    }
    alone = ProxyGenes(head_weight=1.0, tau_head=0.02, ratio=0.7).neighbours(multi_label=True, examples=60)
    assert alone == [
        ProxyGenes(head_weight=1.0, tau_head=0.02, ratio=0.6),
        ProxyGenes(head_weight=1.0, tau_head=0.02, ratio=0.8),
        ProxyGenes(head_weight=1.0, tau_head=0.01, ratio=0.7),
        ProxyGenes(head_weight=1.0, tau_head=0.04, ratio=0.7),
    ]
