"""The centroid head (issue 26): the nearest-centroid classifier over the training rows' embeddings, written as
SQL that reads the `examples` table at run time, so it carries no weights and runs on any embedding model.

A plain classifier on the same embeddings is a SQL program too. The head is the proxy's third part
(`proxy_edits`, gene `head_weight` h, temperature `tau_head`):

    cos_c(x) = x . S_c / |S_c|,   S_c = sum of the unit vectors of the training rows labelled c (x itself left out)
    head(c | x) = softmax over the labels some other training row holds of cos_c(x) / tau_head
    p(c | x) = (1 - h) [the vote and the words] + h head(c | x)         h = 1: the head alone

Its SQL needs only sums of VECTOR_COSINE_SIMILARITY over AI_EMBED: x . S_c is the sum of x's cosines to label c's
rows, and |S_c|^2 the sum of the cosines of every pair of them (P_c). Left out, a training row x_i of label c
sees S_c - x_i, whose squared norm is P_c - 2 x_i . (S_c - x_i) - 1: so its training predictions are exactly
leave-one-out (out of fold) with no second pass, as the vote's are. Nothing is fitted but h and tau_head (genes,
fitted on the training rows by `proxy_fit.fit` and stepped by `tune_proxy`), so nothing fitted to the embedded
model's vectors has to move to Snowflake's: the same SQL computes Cortex's centroids from the exported table.

Why a centroid and not a logistic-regression head: measured on this repository's packs (embedded model, L2
strength and ratio picked on validation rows), a softmax regression on the cosine kernel (no per-dimension
scaling, which is what a head over cosines can express) scores what the bench's standardised probe does
(goemotions test 0.411 vs 0.403, hotpotqa_type 0.836 vs 0.842), but its weights are one number per training row
and label, fitted on one embedding model's vectors: they need a learned table stored with the run, which the
store, the loop and the sandbox do not carry yet. The nearest centroid needs none of that.
"""

from __future__ import annotations

import numpy as np

from coco_sql.numerics import softmax

HEAD = "proxy_head"


def centroid_cosines(kernel: np.ndarray, example_labels: np.ndarray) -> np.ndarray:
    """(n, C): each training row's cosine to each label's centroid of the *other* training rows (module
    docstring); NaN where no other training row holds the label. `kernel` (n, n): the rows' cosines, 1 on the
    diagonal; `example_labels` (n, C): their labels, multi-hot."""
    y = example_labels
    own = np.diag(kernel).copy()
    s = (kernel - np.diag(own)) @ y  # x_i . (S_c - [c in labels_i] x_i)
    pairs = np.einsum("jc,jk,kc->c", y, kernel, y)  # P_c = |S_c|^2
    norm2 = pairs[None, :] - y * (2 * s + own[:, None])
    others = y.sum(axis=0)[None, :] - y
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(others > 0, s / np.sqrt(np.maximum(norm2, 1e-12)), np.nan)


def head_probabilities(cosines: np.ndarray, tau_head: float) -> np.ndarray:
    """head(c | x) from `centroid_cosines`: a softmax over the labels with a centroid, 0 for the others."""
    score = np.where(np.isnan(cosines), -np.inf, cosines / tau_head)
    empty = ~np.isfinite(score).any(axis=1, keepdims=True)
    return np.where(empty, 0.0, softmax(np.where(empty, 0.0, score), axis=1))


def head_ctes(categories: str) -> str:
    """The head's CTEs over the proxy's `proxy_q` (each row's embedding) and `proxy_e` (each training row's
    embedding and labels): each training row's labels among `categories` (a SQL list of string literals), each
    row's summed cosine to each label's rows (itself left out), each label's P_c, and the head's unnormalised
    weight exp((cos - max cos) / tau_head) per row and label (the row's top label at 1, so that no range of
    cosines underflows)."""
    return f"""proxy_hl AS (
  SELECT proxy_e.id, f.value::string AS label
  FROM proxy_e, LATERAL FLATTEN(input => proxy_e.labels) AS f
  WHERE f.value::string IN ({categories})
), proxy_hs AS (
  SELECT proxy_q.id, proxy_hl.label, SUM(VECTOR_COSINE_SIMILARITY(proxy_q.v, proxy_e.v)) AS s
  FROM proxy_q JOIN proxy_e ON proxy_e.id <> proxy_q.id JOIN proxy_hl ON proxy_hl.id = proxy_e.id
  GROUP BY proxy_q.id, proxy_hl.label
), proxy_hn AS (
  SELECT proxy_ha.label, SUM(VECTOR_COSINE_SIMILARITY(proxy_ea.v, proxy_eb.v)) AS n2
  FROM proxy_hl AS proxy_ha JOIN proxy_e AS proxy_ea ON proxy_ea.id = proxy_ha.id
  JOIN proxy_hl AS proxy_hb ON proxy_hb.label = proxy_ha.label JOIN proxy_e AS proxy_eb ON proxy_eb.id = proxy_hb.id
  GROUP BY proxy_ha.label
), {HEAD} AS (
  SELECT proxy_hc.id, proxy_hc.label,
    EXP((proxy_hc.cos - MAX(proxy_hc.cos) OVER (PARTITION BY proxy_hc.id)) / proxy_params.tau_head) AS weight
  FROM (
    SELECT proxy_hs.id, proxy_hs.label, proxy_hs.s / SQRT(GREATEST(
      proxy_hn.n2 - IFF(proxy_own_h.id IS NULL, 0, 2 * proxy_hs.s + 1), 1e-12
    )) AS cos
    FROM proxy_hs JOIN proxy_hn ON proxy_hn.label = proxy_hs.label
    LEFT JOIN proxy_hl AS proxy_own_h ON proxy_own_h.id = proxy_hs.id AND proxy_own_h.label = proxy_hs.label
  ) AS proxy_hc CROSS JOIN proxy_params
)"""


def head_p(row_id: str) -> str:
    """The head's p(label): its weights normalised over the labels of the row `row_id` names."""
    return f"{HEAD}.weight / SUM({HEAD}.weight) OVER (PARTITION BY {row_id})"


__all__ = ["HEAD", "centroid_cosines", "head_ctes", "head_p", "head_probabilities"]
