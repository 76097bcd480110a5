"""A learned proxy in front of the AI call (issue 15, part 2): a classifier over embeddings and words answers
the rows where it is confident, and the AI call runs only on the others.

The proxy is plain SQL, written into the program as CTEs:

    proxy_params  its genes (`proxy_fit.ProxyGenes`), one row: k, tau, tau_label, example_weight, ratio,
                  word_weight, alpha (and head_weight, tau_head with a head)
    proxy_q       each input row's embedding                  AI_EMBED(<model>, <the call's input>)
    proxy_e       each training row's embedding and labels    from `examples` (`tasks.references`): by reference,
                                                              never inline
    proxy_c       each category's embedding                   the call's categories ('label: description')
    proxy_nn      the row's k nearest training rows by cosine (VECTOR_COSINE_SIMILARITY), the row itself left
                  out (`proxy_e.id <> proxy_q.id`), so its predictions on training rows are out of fold
    proxy_qw ..   the words' naive Bayes: each row's distinct words (REGEXP_SUBSTR_ALL), the training rows'
    proxy_words   words and labels, their counts per label, and each row's label probabilities, the row's own
                  counts taken out when it is a training row (`proxy_fit.word_probabilities`)
    proxy_hl ..   the centroid head (`centroid_head`): each row's cosine to each label's centroid of the
    proxy_head    training rows (the row itself left out), as a softmax at tau_head
    proxy_p       p(label) = (1 - h) { (1 - v) [ (1 - w) softmax over the categories of cos / tau_label
                                   + w (the neighbours' exp(cos / tau) that hold the label) / (all neighbours') ]
                                   + v (the words' probability) }
                             + h (the centroid head's probability)
    proxy         the labels with p >= ratio * the top p, and the confidence, the top p

    CASE WHEN proxy.proxy_confidence >= t THEN OBJECT_CONSTRUCT('labels', proxy.proxy_labels) ELSE <AI call> END

The vote is the embedded backend's AI_CLASSIFY with examples (`engines.duckdb.ai.semantic`) written in SQL, with its
constants turned into genes the mutator fits on the training rows (`proxy_fit`); the words read what the
embeddings blur; the centroid head (issue 26) is the nearest-centroid classifier a user would otherwise deploy
instead, computed from the same table. Why not a logistic head: the vote, the counts and the centroids have no
training step, so the same SQL runs in Snowflake over AI_EMBED, VECTOR_COSINE_SIMILARITY, REGEXP_SUBSTR_ALL and
the examples table the export creates from the same training rows, with no UDF, and no weights fitted on the
embedded model's vectors have to be carried to the warehouse's embedding model (they would not transfer;
`centroid_head` says what a logistic head would need). The words' part is the same on either
engine. The vote's genes and t do carry over, but as numbers fitted to the embedded model's cosines (e5's are
anisotropic, so tau_label and t especially): on Cortex's embedding model they are a starting point, and
re-fitting them on the warehouse's vectors is not built yet.

What a proxy saves deployed: one embedding per row instead of every example in every row's prompt. The
threshold t is tuned on the training rows: the proxy's leave-one-out predictions against the parent's
cross-fitted ones. Three edits are offered: the t that scores best, the lowest t within one training row of it
(the proxy answers more rows: cheaper), and t = 0 with the call's examples dropped (the proxy answers every row:
the examples move from the call's prompt to the table, and the program shrinks to a few KB); where the proxy
leaves rows to the call, the call keeps a diverse 16 of its examples. The mutator then tests them like any other
edit. Once a program has a proxy, its genes evolve by single steps (`gene_edits`: `tune_proxy`), each scored
by the draft test on the whole program, guards included, and a proxy without the head may get it
(`head_edits`). The SQL is written by `proxy_sql`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any

import numpy as np
import sqlglot
from sqlglot import exp

from coco_sql.errors import CandidateRejected, EvaluationError
from coco_sql.languages.sql.linear_head import embed_model
from coco_sql.languages.sql.mutate.ai_edits import (
    ClassifySpec,
    TrainingRow,
    TrainingView,
    classify_calls,
    read_spec,
    set_f1,
    set_spec,
)
from coco_sql.languages.sql.mutate.edits import Edit
from coco_sql.languages.sql.mutate.examples import MAX_EXAMPLES, capped
from coco_sql.languages.sql.mutate.linear_edits import linear_column, linear_probabilities
from coco_sql.languages.sql.mutate.proxy_fit import ProxyGenes, cheap, fit, plain_name
from coco_sql.languages.sql.mutate.proxy_sql import MULTI_RATIO, PARAMS, PROXY, ProxyPlan, proxy_ctes
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.sqlkit.ai_arguments import ArgumentError, category_prototypes
from coco_sql.tasks.references import EXAMPLES

MIN_EXAMPLES = 20  # a call with fewer examples costs little per row: nothing for the proxy to save
"""The embedding model the proxy names: Cortex's in Snowflake SQL (a local run maps it to the embedded one)."""


def plan(
    query: exp.Expression, index: int, dialect: str, min_examples: int = MIN_EXAMPLES
) -> ProxyPlan | None:
    """The plan for guarding call `index`, or None when the parent does not have the shape the proxy joins onto:
    one SELECT reading `input` alone (no CTEs, no joins), holding the call, without a proxy yet. The call must
    carry at least MIN_EXAMPLES few-shot examples: the proxy is how a program keeps what many examples give at
    the cost of one embedding per row (offered earlier, its big first gain locks the search into the proxy's own
    local optimum: measured on hotpotqa_type, 0.87 against 0.93)."""
    if not isinstance(query, exp.Select) or query.args.get("with_") or query.args.get("joins"):
        return None
    source = query.args.get("from_")
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table) or table.name.lower() != "input" or table.db:
        return None
    calls = classify_calls(query)
    if index >= len(calls) or calls[index].find_ancestor(exp.Select) is not query:
        return None
    spec = read_spec(calls[index])
    if spec is None or len(spec.example_inputs) < min_examples:
        return None  # few examples cost little per row: nothing for the proxy to save
    try:
        categories = tuple(zip(*category_prototypes(spec.categories), strict=True))
    except ArgumentError:
        return None
    call = calls[index]
    argument = call.this if isinstance(call, exp.AIClassify) else call.expressions[0]
    return ProxyPlan(index, table.alias_or_name, argument.sql(dialect=dialect), categories)


def written_proxy(code: str, dialect: str) -> exp.With | None:
    """The proxy's WITH clause of a program as written, or None when it has no proxy.

    The mutator edits the validator's DuckDB tree and writes it back in the task's dialect, which does not
    give back the Snowflake spelling of every construct the proxy uses (VECTOR_COSINE_SIMILARITY comes back as
    LIST_COSINE_SIMILARITY, LATERAL FLATTEN as JSON_EACH). The AI-pipeline edits never change the proxy's CTEs,
    so its children take them verbatim from the parent's own text instead."""
    try:
        tree = sqlglot.parse_one(code, read=dialect)
    except sqlglot.errors.ParseError:
        return None
    with_clause = tree.args.get("with_") if isinstance(tree, exp.Select) else None
    if with_clause is None or PROXY not in {cte.alias_or_name for cte in with_clause.expressions}:
        return None
    return None if classify_calls(with_clause) else with_clause


def with_proxy(
    plan: ProxyPlan, ctes: str, threshold: float, dialect: str, examples: Sequence[Any] | None = None
) -> Callable[[exp.Expression], exp.Expression]:
    """The edit: the proxy's CTEs, `LEFT JOIN proxy`, and the call guarded by the proxy's confidence.
    `examples`: the few-shot examples the call keeps for the rows the proxy leaves to it (None: all of them;
    empty: none, the proxy reads them from the table)."""

    def apply(query: exp.Expression) -> exp.Expression:
        child = query.copy()
        call = classify_calls(child)[plan.index]
        spec = read_spec(call)
        if examples is not None and spec is not None:
            config = {key: value for key, value in spec.config.items() if key != "examples"}
            set_spec(
                call,
                ClassifySpec(
                    spec.categories, {**config, **({"examples": list(examples)} if examples else {})}
                ),
            )
        answer = exp.Anonymous(
            this="OBJECT_CONSTRUCT",
            expressions=[exp.Literal.string("labels"), exp.column("proxy_labels", table=PROXY)],
        )
        sure = exp.GTE(
            this=exp.column("proxy_confidence", table=PROXY),
            expression=exp.Literal.number(round(threshold, 4)),
        )
        call.replace(exp.Case(ifs=[exp.If(this=sure, true=answer)], default=call.copy()))
        for column in list(child.find_all(exp.Column)):  # `id` is in both relations now
            if column.name.lower() == "id" and not column.table:
                column.set("table", exp.to_identifier(plan.source))
        child = child.join(
            exp.to_table(PROXY), on=f"{PROXY}.id = {plan.source}.id", join_type="left", dialect=dialect
        )
        with_clause = sqlglot.parse_one(f"{ctes} SELECT 1", read=dialect).args["with_"]
        child.set("with_", with_clause)
        return child

    return apply


def predictions(
    env: DraftEnvironment, plan: ProxyPlan, ctes: str
) -> dict[str, tuple[tuple[str, ...], float]] | None:
    """The proxy's labels and confidence on every training row (out of fold), or None when it cannot run. The
    proxy runs as a program does (`DraftEnvironment.program_columns`): in a warehouse, in its own dialect."""
    output = env.output_column
    code = (
        f"{ctes}\nSELECT input.id, {PROXY}.proxy_labels AS {output}, {PROXY}.proxy_confidence AS proxy_confidence"
        f"\nFROM input LEFT JOIN {PROXY} ON {PROXY}.id = input.id"
    )
    try:
        result = env.program_columns(code)
    except (CandidateRejected, EvaluationError):
        return None
    index = {str(c).lower(): k for k, c in enumerate(result.columns)}  # a warehouse folds names to upper case
    found: dict[str, tuple[tuple[str, ...], float]] = {}
    for row in result.rows:
        labels, confidence = row[index[output.lower()]], row[index["proxy_confidence"]]
        if isinstance(labels, str):  # a warehouse's ARRAY arrives as JSON text
            labels = json.loads(labels)
        if labels is not None and confidence is not None:
            found[str(row[index["id"]])] = (tuple(str(v) for v in labels), float(confidence))
    return found


def thresholds(
    rows: Sequence[TrainingRow], proxy: Mapping[str, tuple[tuple[str, ...], float]]
) -> list[tuple[float, float, float]]:
    """(t, mean score, share of rows the proxy answers) for each t worth trying: the proxy's confidences on the
    training rows, highest first (a row the proxy cannot answer keeps the parent's prediction)."""
    confidence = np.array([proxy[r.instance_id][1] if r.instance_id in proxy else -1.0 for r in rows])
    own = np.array([set_f1(r.predicted, r.gold) for r in rows])
    by_proxy = np.array(
        [set_f1(proxy[r.instance_id][0], r.gold) if r.instance_id in proxy else 0.0 for r in rows]
    )
    order = np.argsort(-confidence, kind="stable")
    gain = np.cumsum(by_proxy[order] - own[order])  # answering the k most confident rows by the proxy
    base, n = own.sum(), len(rows)
    found = []
    for k in range(n):
        t = confidence[order[k]]
        if t < 0 or (k + 1 < n and confidence[order[k + 1]] == t):
            continue  # rows tied at t are answered together
        found.append((float(t), float(base + gain[k]) / n, (k + 1) / n))
    return found


def prototype_vectors(env: DraftEnvironment, texts: Sequence[str]) -> np.ndarray | None:
    """The categories' prototype texts embedded by the run's embedding model (L2-normalised, in order), or
    None when the engine cannot embed them."""
    values = ", ".join(f"({i}, {exp.Literal.string(t).sql(SANDBOX_DIALECT)})" for i, t in enumerate(texts))
    try:
        result = env.probe(
            f"SELECT i, AI_EMBED(to_json(''), to_json(t)) FROM (VALUES {values}) AS c(i, t) ORDER BY i"
        )
    except EvaluationError:
        return None
    vectors = [v for _, v in result.rows]
    if len(vectors) != len(texts) or any(not v for v in vectors):
        return None
    matrix = np.asarray(vectors, dtype=np.float64)
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def fitted(
    plan: ProxyPlan,
    view: TrainingView,
    env: DraftEnvironment,
    multi_label: bool,
    linear: str | None = None,
) -> list[tuple[ProxyGenes, float]]:
    """Every genes the fit scores, best first (`proxy_fit.fit`), with the linear head of input column `linear`
    (`linear_edits`) among the parts; empty when they cannot be fitted (no embeddings)."""
    labels = [label for label, _ in plan.categories]
    prototypes = prototype_vectors(env, [text for _, text in plan.categories])
    if prototypes is None:
        return []
    by_linear = (
        linear_probabilities(env, linear, view.rows, dict(view.vectors), labels)
        if linear is not None
        else None
    )
    return fit(view.rows, view.vectors, prototypes, labels, multi_label, by_linear)


def fitted_genes(
    plan: ProxyPlan,
    view: TrainingView,
    env: DraftEnvironment,
    multi_label: bool,
    linear: str | None = None,
) -> list[ProxyGenes]:
    """The genes that rank best leave-one-out on the training rows (`fitted`), and the best of the cheap ones
    too (`proxy_fit.cheap`: no embedding of the training rows deployed) when it is another; the embedded
    AI_CLASSIFY's constants when they cannot be fitted (no embeddings)."""
    scored = fitted(plan, view, env, multi_label, linear)
    if not scored:
        return [ProxyGenes(ratio=MULTI_RATIO if multi_label else 1.0)]
    chosen = [scored[0][0]]
    cheapest = next((genes for genes, _ in scored if cheap(genes)), None)  # the fit's order: best first
    return chosen + ([cheapest] if cheapest is not None and cheapest != chosen[0] else [])


def written_genes(proxy: exp.With) -> ProxyGenes | None:
    """The genes of a program's proxy as written (its `proxy_params` CTE), or None without one."""
    cte = next((c for c in proxy.expressions if c.alias_or_name == PARAMS), None)
    return ProxyGenes.read(cte.this) if cte is not None else None


def with_genes(
    proxy: exp.With, genes: ProxyGenes, dialect: str
) -> Callable[[exp.Expression], exp.Expression]:
    """The edit: the program with its proxy's `proxy_params` set to `genes`, every other CTE as written."""
    rewritten = proxy.copy()
    for cte in rewritten.expressions:
        if cte.alias_or_name == PARAMS:
            cte.set("this", sqlglot.parse_one(genes.sql(), read=dialect))

    def apply(query: exp.Expression) -> exp.Expression:
        child = query.copy()
        child.set("with_", rewritten.copy())
        return child

    return apply


def gene_edits(proxy: exp.With | None, rows: int, dialect: str, multi_label: bool) -> list[Edit]:
    """The genes are evolvable: one edit per neighbour of the written genes (`ProxyGenes.neighbours`). The
    numpy fit chose them for the proxy alone; the draft test scores the whole program, guards included."""
    genes = written_genes(proxy) if proxy is not None else None
    if proxy is None or genes is None:
        return []
    edits = []
    for step in genes.neighbours(multi_label, rows):
        changed = ", ".join(
            f"{name} {getattr(genes, name)} -> {getattr(step, name)}"
            for name in (f.name for f in fields(ProxyGenes))
            if getattr(step, name) != getattr(genes, name)
        )
        edits.append(Edit("tune_proxy", f"the proxy's {changed}", with_genes(proxy, step, dialect)))
    return edits


def proxy_edits(
    query: exp.Expression,
    views: Mapping[int, TrainingView],
    env: DraftEnvironment,
    multi_label: bool,
    rng: np.random.Generator | None = None,
    fallback_examples: int = MAX_EXAMPLES,
) -> list[Edit]:
    """The proxy edits for each AI_CLASSIFY call the parent's shape allows (module docstring). Where the proxy
    leaves rows to the call, the call keeps a diverse `fallback_examples` of its examples (drawn with `rng`;
    None: a fixed generator): the rest are in the table the proxy reads."""
    if "AI_EMBED" not in env.allowed_functions or not views:
        return []
    generator = rng if rng is not None else np.random.default_rng(0)
    edits: list[Edit] = []
    for index, view in views.items():
        linear = linear_column(query, index, env)
        # With the linear head the proxy is offered from the seed on (issue 38): it needs no examples in the
        # call, and the cascade it makes costs one embedding per row where the call is not needed.
        where = plan(query, index, env.dialect, 0 if linear is not None else MIN_EXAMPLES)
        if where is None:
            continue
        for genes in fitted_genes(where, view, env, multi_label, linear):
            edits.extend(
                _edits_for(
                    query, index, where, view, env, genes, linear, multi_label, generator, fallback_examples
                )
            )
    return edits


PLAIN_OPERATOR = "plain_head"
"""A plain head alone answers every row: the linear head or the centroid head, the classifier a user would
otherwise deploy (`plain_heads`)."""


def plain_description(index: int, name: str, knobs: str, examples: int) -> str:
    """A plain head's approach: the same text whichever parent it is made from, so that the run knows it was
    proposed (`plain_heads.proposed`)."""
    return (
        f"AI_CLASSIFY #{index + 1}: the {name} head alone answers every row ({EXAMPLES}; {knobs}); the call, "
        f"without its {examples} examples, only where the head has no answer"
    )


def describe_genes(genes: ProxyGenes) -> str:
    """The genes in words, for an edit's approach."""
    return (
        f"k {genes.k}, tau {genes.tau}, example weight {genes.example_weight}, ratio {genes.ratio}, "
        f"words' weight {genes.word_weight}, alpha {genes.alpha}"
        + (
            f", centroid head's weight {genes.head_weight}, tau_head {genes.tau_head}"
            if genes.head_weight
            else ""
        )
        + (f", linear head's weight {genes.linear_weight}" if genes.linear_weight else "")
    )


def _edits_for(
    query: exp.Expression,
    index: int,
    where: ProxyPlan,
    view: TrainingView,
    env: DraftEnvironment,
    genes: ProxyGenes,
    linear: str | None,
    multi_label: bool,
    generator: np.random.Generator,
    fallback_examples: int = MAX_EXAMPLES,
) -> list[Edit]:
    """The proxy edits of one call for one set of genes: the best threshold, the cheapest within a training
    row of it, and the proxy alone (`proxy_edits`)."""
    model = embed_model(env.dialect)
    operator = "linear_head" if genes.linear_weight > 0 else "knn_proxy"
    edits: list[Edit] = []
    ctes = proxy_ctes(where, env.output_column, multi_label, model, genes, linear)
    proxy = predictions(env, where, ctes)
    options = thresholds(view.rows, proxy) if proxy else []
    if not options:
        return []
    best = max(options, key=lambda o: (o[1], -o[0]))
    cheapest = min((o for o in options if o[1] >= best[1] - 1.0 / len(view.rows)), key=lambda o: o[0])
    knobs = describe_genes(genes)
    suspect = {r.text for r in view.rows if r.instance_id in view.suspects}  # likely label errors: never kept
    carried = [
        e
        for e in read_spec(classify_calls(query)[index]).config.get("examples") or []  # plan() read it
        if not (isinstance(e, dict) and e.get("input") in suspect)
    ]
    kept, _ = capped(carried, [], generator, view.vectors, fallback_examples)
    for t, score, share in dict.fromkeys((best, cheapest)):
        if share >= 1.0:
            continue  # the proxy answers every training row: the call's examples are dead weight (below)
        edits.append(
            Edit(
                operator,
                f"AI_CLASSIFY #{index + 1}: answer from the training rows ({EXAMPLES}; {knobs}) where "
                f"the proxy's confidence >= {t:.3f} ({share:.0%} of training rows, train score "
                f"{score:.3f}), else the AI call with {len(kept)} of its {len(carried)} examples",
                with_proxy(where, ctes, t, env.dialect, kept),
            )
        )
    alone = options[-1]  # the lowest t: every row the proxy can answer
    plain = plain_name(genes)
    edits.append(
        Edit(
            PLAIN_OPERATOR,
            plain_description(index, plain, knobs, len(carried)),
            with_proxy(where, ctes, 0.0, env.dialect, []),
        )
        if plain is not None
        else Edit(
            operator,
            f"AI_CLASSIFY #{index + 1}: answer every row from the training rows ({EXAMPLES}; {knobs}; "
            f"train score {alone[1]:.3f}); the call, without its {len(carried)} examples, only where the "
            "proxy has no answer",
            with_proxy(where, ctes, 0.0, env.dialect, []),
        )
    )
    return edits


__all__ = [
    "PLAIN_OPERATOR",
    "ProxyPlan",
    "describe_genes",
    "fitted",
    "fitted_genes",
    "gene_edits",
    "plain_description",
    "plan",
    "predictions",
    "proxy_ctes",
    "proxy_edits",
    "thresholds",
    "with_genes",
    "with_proxy",
    "written_genes",
    "written_proxy",
]
