"""The proxy's genes (issue 15, part 2): fitted in numpy on the training rows, written as SQL that computes the same
answers, and a proxy that answers every row so that the call's examples leave the program. Real embedded model,
real DuckDB sandbox, real validator."""

from __future__ import annotations

import numpy as np
import pytest
import sqlglot
from proxy_setting import MODEL, SEED, proxy_setting

from coco_sql.languages.sql.mutate.ai_edits import (
    TrainingRow,
    TrainingView,
    ai_edits,
    answer_of,
    classify_calls,
)
from coco_sql.languages.sql.mutate.ai_pipeline import answered_by_call
from coco_sql.languages.sql.mutate.proxy_edits import (
    fitted_genes,
    gene_edits,
    plan,
    predictions,
    prototype_vectors,
    proxy_ctes,
    proxy_edits,
    with_proxy,
    written_genes,
    written_proxy,
)
from coco_sql.languages.sql.mutate.proxy_fit import (
    ProxyGenes,
    answers,
    fit,
    fit_scores,
    probabilities,
    word_probabilities,
)


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory):
    yield from proxy_setting(tmp_path_factory.mktemp("packs"))


def test_the_fit_ranks_the_grid_and_the_sql_computes_what_numpy_does(setting) -> None:
    pack, _, env, query, view = setting
    where = plan(query, 0, "snowflake")
    assert where is not None and [label for label, _ in where.categories] == ["bridge", "comparison"]
    prototypes = prototype_vectors(env, [text for _, text in where.categories])
    assert prototypes is not None and np.allclose(np.linalg.norm(prototypes, axis=1), 1.0)
    scored = fit(view.rows, view.vectors, prototypes, ["bridge", "comparison"], multi_label=False)
    rate = fit_scores(view.rows, view.vectors, prototypes, ["bridge", "comparison"])
    assert rate is not None
    keys = [rate(genes).key(False) for genes, _ in scored]  # one label per row: Brier, then the score
    assert keys == sorted(keys) and keys[0] < keys[-1]  # best first, and the genes matter
    assert all(score == rate(genes).score for genes, score in scored)
    genes = fitted_genes(where, view, env, multi_label=False)[0]
    assert genes == scored[0][0] and genes.ratio == 1.0

    # numpy's leave-one-out answers of the fitted genes, row by row, against the SQL's on the same rows
    x = np.stack([view.vectors[r.text] for r in view.rows])
    similarity = x @ x.T
    np.fill_diagonal(similarity, -np.inf)
    example_labels = np.array([[r.gold == ("bridge",), r.gold == ("comparison",)] for r in view.rows], float)
    by_words = word_probabilities([r.text for r in view.rows], example_labels, genes.alpha)
    p = probabilities(similarity, x @ prototypes.T, example_labels, genes, by_words)
    expected = dict(
        zip((r.instance_id for r in view.rows), answers(p, ["bridge", "comparison"], 1.0), strict=True)
    )
    found = predictions(env, where, proxy_ctes(where, "label", False, MODEL, genes))
    assert found is not None and set(found) == set(expected) == set(pack.split("train").ids)
    assert sum(found[i][0] == expected[i] for i in found) >= len(found) - 1  # a float tie at most
    for i in found:  # the confidence is the top label's probability
        assert found[i][1] == pytest.approx(p[list(expected).index(i)].max(), abs=1e-4)  # float32 vectors
    honest = np.mean([found[r.instance_id][0] == r.gold for r in view.rows])
    assert honest == pytest.approx(scored[0][1], abs=1.5 / len(view.rows))


def test_genes_change_the_sql_proxy_answers(setting) -> None:
    _, _, env, query, _ = setting
    where = plan(query, 0, "snowflake")
    assert where is not None
    near = predictions(
        env, where, proxy_ctes(where, "label", False, MODEL, ProxyGenes(k=1, example_weight=1.0))
    )
    prior = predictions(env, where, proxy_ctes(where, "label", False, MODEL, ProxyGenes(example_weight=0.0)))
    assert near and prior and set(near) == set(prior)
    assert any(near[i][0] != prior[i][0] for i in near)  # the examples against the categories alone
    assert all(confidence == pytest.approx(1.0) for _, confidence in near.values())  # one neighbour: certain


def test_a_proxy_that_answers_every_row_takes_the_examples_out_of_the_program(setting) -> None:
    pack, evaluator, env, query, view = setting
    edits = proxy_edits(query, {0: view}, env, multi_label=False)
    alone = [e for e in edits if "answer every row" in e.approach]  # one per set of genes offered
    assert alone and all("without its 20 examples" in e.approach for e in alone)
    for cascade in (
        e for e in edits if e not in alone
    ):  # the call keeps a diverse 16 for the rows left to it
        assert "else the AI call with 16 of its 20 examples" in cascade.approach
        assert cascade.apply(query).sql(dialect="snowflake").count("'Who is older, A") == 16
    where = plan(query, 0, "snowflake")
    assert where is not None
    ctes = proxy_ctes(where, "label", False, MODEL)
    shots = [{"input": "Who is older, A1 or B?", "labels": ["comparison"]}]
    cascade = with_proxy(where, ctes, 0.9, "snowflake", shots)(query).sql(dialect="snowflake")
    assert cascade.count("'Who is older, A") == 1 and "proxy.proxy_confidence >= 0.9" in cascade
    child = alone[0].apply(query).sql(dialect="snowflake", pretty=True)
    assert "Who is older, A1" not in child and "'examples'" not in child
    assert len(child.encode()) < 8 * 1024 and "FROM examples AS proxy_" in child  # by reference
    outcome = evaluator.evaluate(child, "val")
    assert outcome.ok, outcome.error
    functions = {function for (function, _), line in outcome.usage.lines.items() if line.calls}
    assert not any("CLASSIFY" in f for f in functions) and any("EMBED" in f for f in functions)
    assert outcome.score > 0.5

    # a keyword guard mined afterwards overrides the proxy's answers, not only the call's
    tree = sqlglot.parse_one(child, read="snowflake")
    call = classify_calls(tree)[0]
    assert isinstance(answer_of(call), sqlglot.exp.Case) and answer_of(call).find(sqlglot.exp.Column)
    rows = tuple(
        TrainingRow(str(i), f"Is X{i} or Y{i} older?", ("comparison",), ("bridge",)) for i in range(8)
    ) + tuple(TrainingRow(f"b{i}", f"Who wrote book {i}?", ("bridge",), ("bridge",)) for i in range(16))
    guard = next(
        e
        for e in ai_edits(tree, {0: TrainingView(rows, "question")}, [], multi_label=False)
        if e.operator == "keyword_guard" and "'older'" in e.approach
    )
    guarded = guard.apply(tree).sql(dialect="snowflake", pretty=True)
    result = evaluator.evaluate(guarded, "val")
    assert result.ok, result.error
    val = pack.split("val")
    questions = dict(zip(val.inputs["id"].astype(str), val.inputs["question"], strict=True))
    matched = [i for i in result.ids if "older" in questions[i].lower()]
    assert matched and all(result.row(i).output == '"comparison"' for i in matched)


def test_genes_read_back_from_the_sql_and_step_to_valid_neighbours() -> None:
    genes = ProxyGenes(k=40, tau=0.02, example_weight=0.9, ratio=0.6)
    assert ProxyGenes.read(sqlglot.parse_one(genes.sql(), read="snowflake")) == genes
    assert ProxyGenes.read(sqlglot.parse_one("SELECT 40 AS k, 0.02 AS tau", read="snowflake")) is None
    steps = genes.neighbours(multi_label=True, examples=60)
    assert ProxyGenes(k=20, tau=0.02, example_weight=0.9, ratio=0.6) in steps
    assert ProxyGenes(k=40, tau=0.02, example_weight=0.9, ratio=0.5) in steps
    assert all(s.k < 60 and 0 < s.example_weight <= 1 and 0 < s.ratio <= 1 for s in steps)
    assert not any(s.k == 80 for s in steps) and not any(s.example_weight > 1 for s in steps)
    single = ProxyGenes(k=10).neighbours(multi_label=False, examples=60)
    assert all(s.ratio == 1.0 and s.word_weight == 0 for s in single) and len(single) == 8
    # a step never adds or drops a part of the proxy: words stay off, alone, or mixed in
    alone = ProxyGenes(word_weight=1.0, alpha=0.3).neighbours(multi_label=False, examples=60)
    assert alone == [ProxyGenes(word_weight=1.0, alpha=0.15), ProxyGenes(word_weight=1.0, alpha=0.6)]
    mixed = ProxyGenes(word_weight=0.25).neighbours(multi_label=False, examples=60)
    assert {s.word_weight for s in mixed} == {0.25, 0.5} and {s.alpha for s in mixed} == {0.15, 0.3, 0.6}


@pytest.mark.slow
def test_the_genes_evolve_by_single_steps_that_only_rewrite_proxy_params(setting) -> None:
    _, evaluator, _, query, view = setting
    where = plan(query, 0, "snowflake")
    assert where is not None  # a proxy with the vote: every kind of step applies to it
    alone = with_proxy(where, proxy_ctes(where, "label", False, MODEL, ProxyGenes()), 0.0, "snowflake", [])
    child = alone(query).sql(dialect="snowflake", pretty=True)
    proxy = written_proxy(child, "snowflake")
    assert proxy is not None and written_genes(proxy) is not None
    parent = evaluator.evaluate(child, "train")
    assert parent.ok and answered_by_call(parent) == 0 < answered_by_call(evaluator.evaluate(SEED, "train"))
    edits = gene_edits(proxy, len(view.rows), "snowflake", multi_label=False)
    steps = written_genes(proxy).neighbours(False, len(view.rows))  # type: ignore[union-attr]
    assert len(edits) == len(steps) >= 8 and all(e.operator == "tune_proxy" for e in edits)
    outputs = set()
    for edit in edits:
        code = edit.apply(sqlglot.parse_one(child, read="snowflake")).sql(dialect="snowflake", pretty=True)
        before, after = child.split("), proxy_q AS", 1), code.split("), proxy_q AS", 1)
        assert before[1] == after[1] and before[0] != after[0]  # proxy_params changed, nothing else
        outcome = evaluator.evaluate(code, "train")
        assert outcome.ok, outcome.error
        outputs.add(tuple(outcome.outputs))
    assert len(outputs) > 1  # the steps change answers


@pytest.mark.parametrize("word_weight", [1.0, 0.5])
def test_the_sql_words_naive_bayes_computes_what_numpy_does_leaving_each_row_out(
    setting, word_weight
) -> None:
    _, _, env, query, view = setting
    where = plan(query, 0, "snowflake")
    assert where is not None
    labels = ["bridge", "comparison"]
    genes = ProxyGenes(k=10, tau=0.02, example_weight=0.75, word_weight=word_weight, alpha=0.3)
    x = np.stack([view.vectors[r.text] for r in view.rows])
    similarity = x @ x.T
    np.fill_diagonal(similarity, -np.inf)
    example_labels = np.array([[label in r.gold for label in labels] for r in view.rows], float)
    by_words = word_probabilities([r.text for r in view.rows], example_labels, genes.alpha)
    prototypes = prototype_vectors(env, [text for _, text in where.categories])
    assert prototypes is not None
    p = probabilities(similarity, x @ prototypes.T, example_labels, genes, by_words)
    ctes = proxy_ctes(where, "label", False, MODEL, genes)
    assert ("AI_EMBED" in ctes) == (
        word_weight < 1
    ) and "REGEXP_SUBSTR_ALL" in ctes  # only the parts it weighs
    found = predictions(env, where, ctes)
    assert found is not None and set(found) == {r.instance_id for r in view.rows}
    expected = dict(zip((r.instance_id for r in view.rows), answers(p, labels, 1.0), strict=True))
    assert sum(found[i][0] == expected[i] for i in found) >= len(found) - 1  # a float tie at most
    for row, top in zip(view.rows, p.max(axis=1), strict=True):
        assert found[row.instance_id][1] == pytest.approx(top, abs=1e-4)
    # leave-one-out, so the words do not grade the rows they came from: under 1.0 on the training rows
    honest = np.mean([found[r.instance_id][0] == r.gold for r in view.rows])
    assert 0.6 < honest < 1.0
