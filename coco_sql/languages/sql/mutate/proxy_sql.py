"""The learned proxy's SQL (`proxy_edits` explains the proxy): its CTEs, written from a plan and its genes, and
the plan read back from a proxy as written, so that an edit can rewrite a proxy's parts (a head added,
`head_edits`) and not only its genes.

Only the parts the genes weigh are written: the vote (embeddings of the rows, the examples and the categories;
the k nearest examples) when the words and the head leave it a share, the words when they have one, the
centroid head (`centroid_head`) when it has one. A proxy without a head is written exactly as before heads.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from coco_sql.languages.sql.linear_head import EXAMPLE_VECTORS, FOLDS, LINEAR_HEAD
from coco_sql.languages.sql.mutate.centroid_head import HEAD, head_ctes, head_p
from coco_sql.languages.sql.mutate.proxy_fit import WORD_PATTERN, ProxyGenes
from coco_sql.llm.routing import EMBEDDED_MODELS, embedding_dimensions
from coco_sql.plugin_loader import DEPLOY_DIALECT
from coco_sql.tasks.references import EXAMPLES

MULTI_RATIO = 0.7  # the embedded AI_CLASSIFY's, for a proxy written without fitted genes
PROXY = "proxy"
PARAMS = "proxy_params"


@dataclass(frozen=True)
class ProxyPlan:
    """Where a proxy goes: the parent's one SELECT over `input`, the AI_CLASSIFY call it guards, and the SQL of
    that call's input expression."""

    index: int  # the call's place among the query's AI_CLASSIFY calls
    source: str  # the name the SELECT reads `input` by (its alias, or `input`)
    input_sql: str  # the call's input, in the task's dialect
    categories: tuple[tuple[str, str], ...]  # each label and the text its prototype embeds


_VOTE = """(1 - proxy_params.example_weight) * proxy_lab.weight / SUM(proxy_lab.weight) OVER (PARTITION BY proxy_lab.id)
      + proxy_params.example_weight * COALESCE(proxy_ex.weight / proxy_total.weight, 0)"""
"""The vote's p(label): the categories' softmax and the neighbours' share, mixed by the examples' weight."""


def _words_p(row_id: str) -> str:
    """The words' p(label): proxy_words' exp(s - max s), normalised over the labels of the row `row_id` names."""
    return f"proxy_words.weight / SUM(proxy_words.weight) OVER (PARTITION BY {row_id})"


def proxy_ctes(
    plan: ProxyPlan,
    label_column: str,
    multi: bool,
    model: str,
    genes: ProxyGenes | None = None,
    linear_column: str | None = None,
) -> str:
    """The proxy's CTEs (`proxy_edits`' docstring), as the WITH clause of a query (Snowflake SQL; DuckDB reads it
    too). Without `genes`, the embedded AI_CLASSIFY's constants. Only the parts the genes weigh are written: no
    words at word_weight 0, no vote at word_weight 1 or head_weight 1 (and no embeddings at all for the words
    alone), no head at head_weight 0; the learned linear head (`linear_column`: the input column whose head it
    reads from the `linear_head` table) at linear_weight > 0, alone at 1."""
    genes = genes or ProxyGenes(ratio=MULTI_RATIO if multi else 1.0)

    def labels_of(rows: str) -> str:
        return f"{rows}.{label_column}" if multi else f"ARRAY_CONSTRUCT({rows}.{label_column})"

    g = genes.linear_weight
    if g > 0 and linear_column is None:
        raise ValueError("a proxy with the linear head needs its input column")
    h, v = (genes.head_weight, genes.word_weight) if g < 1 else (0.0, 0.0)
    vote, words = g < 1 and h < 1 and v < 1, g < 1 and h < 1 and v > 0
    parts = [f"WITH {PARAMS} AS (\n  {genes.sql()}\n)"]
    if vote or h > 0:
        parts.append(_embedding_ctes(plan, model, labels_of("proxy_e_rows"), linear_column, vote))
    elif g > 0:
        parts.append(_query_cte(plan, model))
    if g > 0:
        parts.append(_linear_ctes(str(linear_column), _categories(plan), model))
    if vote:
        parts.append(_vote_ctes())
    if words:
        parts.append(_word_ctes(plan, labels_of("proxy_el_rows")))
    if h > 0:
        parts.append(head_ctes(_categories(plan)))
    base_from = """FROM proxy_lab CROSS JOIN proxy_params
  LEFT JOIN proxy_ex ON proxy_ex.id = proxy_lab.id AND proxy_ex.label = proxy_lab.label
  LEFT JOIN proxy_total ON proxy_total.id = proxy_lab.id"""
    if g == 1:
        p = f"SELECT id, label, {_linear_p('id')} AS p FROM proxy_lin"
    elif h == 1:
        p = f"SELECT id, label, {head_p('id')} AS p FROM {HEAD}"
    elif v == 1:
        p = f"SELECT id, label, {_words_p('id')} AS p FROM proxy_words"
    elif v == 0 and h == 0:
        p = f"SELECT proxy_lab.id, proxy_lab.label, {_VOTE} AS p\n  {base_from}"
    elif h == 0:
        p = f"""SELECT proxy_lab.id, proxy_lab.label,
    (1 - proxy_params.word_weight) * ({_VOTE}) + proxy_params.word_weight * COALESCE({_words_p("proxy_lab.id")}, 0) AS p
  {base_from}
  LEFT JOIN proxy_words ON proxy_words.id = proxy_lab.id AND proxy_words.label = proxy_lab.label"""
    else:  # the head mixed into the vote, or into the vote and the words
        base = (
            _VOTE
            if v == 0
            else f"(1 - proxy_params.word_weight) * ({_VOTE})\n"
            f"      + proxy_params.word_weight * COALESCE({_words_p('proxy_lab.id')}, 0)"
        )
        joins = (
            ""
            if v == 0
            else "\n  LEFT JOIN proxy_words ON proxy_words.id = proxy_lab.id AND proxy_words.label = proxy_lab.label"
        )
        p = f"""SELECT proxy_lab.id, proxy_lab.label,
    (1 - proxy_params.head_weight) * ({base})
    + proxy_params.head_weight * COALESCE({head_p("proxy_lab.id")}, 0) AS p
  {base_from}{joins}
  LEFT JOIN {HEAD} ON {HEAD}.id = proxy_lab.id AND {HEAD}.label = proxy_lab.label"""
    if 0 < g < 1:  # the rest's p, then the linear head mixed in
        p = f"""SELECT proxy_pb.id, proxy_pb.label,
    (1 - proxy_params.linear_weight) * proxy_pb.p + proxy_params.linear_weight * COALESCE(proxy_pl.p, 0) AS p
  FROM ({p}) AS proxy_pb CROSS JOIN proxy_params
  LEFT JOIN (SELECT id, label, {_linear_p("id")} AS p FROM proxy_lin) AS proxy_pl
    ON proxy_pl.id = proxy_pb.id AND proxy_pl.label = proxy_pb.label"""
    parts.append(f"""proxy_p AS (
  {p}
), {PROXY} AS (
  SELECT proxy_p.id, ARRAY_AGG(proxy_p.label) WITHIN GROUP (ORDER BY proxy_p.p DESC, proxy_p.label) AS proxy_labels,
    MAX(proxy_p.p) AS proxy_confidence
  FROM (SELECT id, label, p, MAX(p) OVER (PARTITION BY id) AS top FROM proxy_p) AS proxy_p CROSS JOIN proxy_params
  WHERE proxy_p.p >= proxy_params.ratio * proxy_p.top
  GROUP BY proxy_p.id
)""")
    return "\n" + ", ".join(parts)


def _categories(plan: ProxyPlan) -> str:
    """The call's labels as a SQL list of string literals."""
    return ", ".join(exp.Literal.string(label).sql(DEPLOY_DIALECT) for label, _ in plan.categories)


def _embedding_ctes(
    plan: ProxyPlan, model: str, labels: str, stored: str | None = None, categories: bool = True
) -> str:
    """proxy_q, proxy_e and proxy_c: the embeddings of the rows, of the examples (with their labels) and of the
    categories. `stored`: the text column whose training rows' vectors the table `example_vectors` holds
    (`languages.sql.linear_head`): proxy_e reads them there instead of embedding every `examples` row on every
    query (deployed, the examples cost nothing per row). `categories`: whether proxy_c is written (the vote's
    label part needs it; the centroid head and the linear head do not)."""
    values = ",\n    ".join(
        f"({exp.Literal.string(label).sql(DEPLOY_DIALECT)}, {exp.Literal.string(text).sql(DEPLOY_DIALECT)})"
        for label, text in plan.categories
    )
    if stored is None:
        examples = f"SELECT id, {labels} AS labels, AI_EMBED('{model}', {plan.input_sql}) AS v FROM {EXAMPLES} AS proxy_e_rows"
    else:
        column = exp.Literal.string(stored).sql(DEPLOY_DIALECT)
        examples = f"""SELECT proxy_e_rows.id, {labels} AS labels, {stored_vector("proxy_ev.v", model)} AS v
  FROM {EXAMPLES} AS proxy_e_rows JOIN {EXAMPLE_VECTORS} AS proxy_ev
    ON proxy_ev.id = proxy_e_rows.id AND proxy_ev.input_column = {column}"""
    ctes = f"""proxy_q AS (
  SELECT id, AI_EMBED('{model}', {plan.input_sql}) AS v FROM input
), proxy_e AS (
  {examples}
)"""
    if categories:
        ctes += f""", proxy_c AS (
  SELECT label, AI_EMBED('{model}', prototype) AS v
  FROM (VALUES
    {values}
  ) AS proxy_c_rows(label, prototype)
)"""
    return ctes


def _query_cte(plan: ProxyPlan, model: str) -> str:
    """proxy_q alone: each row's embedding (a proxy whose only embedding part is the linear head)."""
    return f"""proxy_q AS (
  SELECT id, AI_EMBED('{model}', {plan.input_sql}) AS v FROM input
)"""


def _linear_p(row_id: str) -> str:
    """The linear head's p(label): its weights normalised over the labels of the row `row_id` names."""
    return f"proxy_lin.weight / SUM(proxy_lin.weight) OVER (PARTITION BY {row_id})"


def stored_vector(column: str, model: str) -> str:
    """A vector read from a reference table as the type `model`'s AI_EMBED returns: Snowflake stores it as an
    ARRAY, which its VECTOR_* functions do not take, so a Cortex model's is cast to VECTOR(FLOAT, n) (the checker
    reads that as DuckDB's FLOAT[]); the embedded model's (DuckDB SQL) is FLOAT[] already."""
    if model in EMBEDDED_MODELS:
        return column
    return f"CAST({column} AS VECTOR(FLOAT, {embedding_dimensions(model)}))"


def _linear_ctes(column: str, categories: str, model: str) -> str:
    """The learned linear head (`languages.sql.linear_head`): each training row's fold from its place among the
    sorted `examples` ids, each row's logit per label from the fold's weights (fold 0 for a row that is not a
    training row: out of fold for those that are), and exp(z - max z) per row and label, over the call's
    categories."""
    col = exp.Literal.string(column).sql(DEPLOY_DIALECT)
    return f"""proxy_lf AS (
  SELECT id, MOD(ROW_NUMBER() OVER (ORDER BY id) - 1, {FOLDS}) + 1 AS fold FROM {EXAMPLES}
), proxy_lz AS (
  SELECT proxy_q.id, {LINEAR_HEAD}.label,
    VECTOR_INNER_PRODUCT(proxy_q.v, {stored_vector(f"{LINEAR_HEAD}.weights", model)}) + {LINEAR_HEAD}.bias AS z
  FROM proxy_q LEFT JOIN proxy_lf ON proxy_lf.id = proxy_q.id
  JOIN {LINEAR_HEAD} ON {LINEAR_HEAD}.fold = COALESCE(proxy_lf.fold, 0) AND {LINEAR_HEAD}.input_column = {col}
  WHERE {LINEAR_HEAD}.label IN ({categories})
), proxy_lin AS (
  SELECT id, label, EXP(z - MAX(z) OVER (PARTITION BY id)) AS weight FROM proxy_lz
)"""


def _vote_ctes() -> str:
    """The vote's CTEs, proxy_nn to proxy_lab: each row's k nearest examples (itself left out) and their weight
    per label; each category's weight."""
    return """proxy_nn AS (
  SELECT proxy_q.id, proxy_e.labels,
    EXP((VECTOR_COSINE_SIMILARITY(proxy_q.v, proxy_e.v) - 1) / proxy_params.tau) AS weight
  FROM proxy_q JOIN proxy_e ON proxy_e.id <> proxy_q.id CROSS JOIN proxy_params
  QUALIFY ROW_NUMBER() OVER (
    PARTITION BY proxy_q.id ORDER BY VECTOR_COSINE_SIMILARITY(proxy_q.v, proxy_e.v) DESC, proxy_e.id
  ) <= proxy_params.k
), proxy_ex AS (
  SELECT proxy_nn.id, f.value::string AS label, SUM(proxy_nn.weight) AS weight
  FROM proxy_nn, LATERAL FLATTEN(input => proxy_nn.labels) AS f
  GROUP BY proxy_nn.id, f.value::string
), proxy_total AS (
  SELECT id, SUM(weight) AS weight FROM proxy_nn GROUP BY id
), proxy_lab AS (
  SELECT proxy_q.id, proxy_c.label,
    EXP((VECTOR_COSINE_SIMILARITY(proxy_q.v, proxy_c.v) - 1) / proxy_params.tau_label) AS weight
  FROM proxy_q CROSS JOIN proxy_c CROSS JOIN proxy_params
)"""


def _word_ctes(plan: ProxyPlan, labels: str) -> str:
    """The words' naive Bayes, proxy_qw to proxy_words (`proxy_fit.word_probabilities`): the rows' and the
    examples' distinct words, the examples' labels, counts per label and word, and each row's score per label,
    its own example's counts taken out and its words no other example has left out. Only the call's categories
    count, as in the vote."""
    words = (
        f"REGEXP_SUBSTR_ALL(LOWER({plan.input_sql}), {exp.Literal.string(WORD_PATTERN).sql(DEPLOY_DIALECT)})"
    )
    categories = ", ".join(exp.Literal.string(label).sql(DEPLOY_DIALECT) for label, _ in plan.categories)
    return f"""proxy_qw AS (
  SELECT DISTINCT proxy_qw_rows.id, w.value::string AS word
  FROM input AS proxy_qw_rows, LATERAL FLATTEN(input => {words}) AS w
), proxy_ew AS (
  SELECT DISTINCT proxy_ew_rows.id, w.value::string AS word
  FROM {EXAMPLES} AS proxy_ew_rows, LATERAL FLATTEN(input => {words}) AS w
), proxy_el AS (
  SELECT proxy_el_rows.id, f.value::string AS label
  FROM {EXAMPLES} AS proxy_el_rows, LATERAL FLATTEN(input => {labels}) AS f
  WHERE f.value::string IN ({categories})
), proxy_rw AS (
  SELECT id, COUNT(*) AS t FROM proxy_ew GROUP BY id
), proxy_df AS (
  SELECT word, COUNT(*) AS n, COUNT(*) OVER () AS vocabulary FROM proxy_ew GROUP BY word
), proxy_wc AS (
  SELECT proxy_el.label, proxy_ew.word, COUNT(*) AS n
  FROM proxy_el JOIN proxy_ew ON proxy_ew.id = proxy_el.id
  GROUP BY proxy_el.label, proxy_ew.word
), proxy_lc AS (
  SELECT proxy_el.label, COUNT(*) AS n, SUM(COALESCE(proxy_rw.t, 0)) AS t
  FROM proxy_el LEFT JOIN proxy_rw ON proxy_rw.id = proxy_el.id
  GROUP BY proxy_el.label
), proxy_ws AS (
  SELECT proxy_qw.id, proxy_lc.label,
    SUM(LN(
      (COALESCE(proxy_wc.n, 0) - IFF(proxy_own.id IS NULL, 0, 1) + proxy_params.alpha)
      / (proxy_lc.t - IFF(proxy_own.id IS NULL, 0, proxy_self.t) + proxy_params.alpha * proxy_df.vocabulary)
    )) AS s
  FROM proxy_qw JOIN proxy_df ON proxy_df.word = proxy_qw.word
  LEFT JOIN proxy_rw AS proxy_self ON proxy_self.id = proxy_qw.id
  CROSS JOIN proxy_lc CROSS JOIN proxy_params
  LEFT JOIN proxy_wc ON proxy_wc.label = proxy_lc.label AND proxy_wc.word = proxy_qw.word
  LEFT JOIN proxy_el AS proxy_own ON proxy_own.id = proxy_qw.id AND proxy_own.label = proxy_lc.label
  WHERE proxy_df.n > IFF(proxy_self.id IS NULL, 0, 1)
  GROUP BY proxy_qw.id, proxy_lc.label
), proxy_nb AS (
  SELECT proxy_nb_rows.id, proxy_lc.label,
    LN(GREATEST(proxy_lc.n - IFF(proxy_own.id IS NULL, 0, 1), 0.5)) + COALESCE(proxy_ws.s, 0) AS s
  FROM input AS proxy_nb_rows CROSS JOIN proxy_lc
  LEFT JOIN proxy_el AS proxy_own ON proxy_own.id = proxy_nb_rows.id AND proxy_own.label = proxy_lc.label
  LEFT JOIN proxy_ws ON proxy_ws.id = proxy_nb_rows.id AND proxy_ws.label = proxy_lc.label
), proxy_words AS (
  SELECT id, label, EXP(s - MAX(s) OVER (PARTITION BY id)) AS weight FROM proxy_nb
)"""
