"""Decisions from embeddings: how the embedded backend answers AI_CLASSIFY, AI_SENTIMENT and AI_SIMILARITY.

Pure numpy over L2-normalised vectors (cosine = dot product). The constants were chosen once on the goemotions
VALIDATION rows (never test) and are fixed: the second classification pack checks they are not tuned to one
dataset.

Classification (AI_CLASSIFY with categories c = 1..C, each a label and optional description, and optional
labelled examples):

    p_label(c | x) = softmax_c( cos(x, e_c) / TAU_LABEL )            e_c: embedding of "label: description"
    p_ex(c | x)    = sum_{i in kNN_K(x)} w_i [c in labels_i],        w = softmax_i( cos(x, x_i) / TAU_EXAMPLE )
    p(c | x)       = p_label                                         without examples
                   = (1 - w) p_label + w p_ex                        with m examples,
    w              = (1 - ALPHA) min(1, m / K_NEIGHBOURS)

The examples' weight grows with the evidence: one example cannot turn every row into its label (w = 0.0375),
and from K_NEIGHBOURS = 20 examples on w = 1 - ALPHA = 0.75, the weight the constants were chosen with (so
decisions with 20 or more examples, and without examples, are those of the original fit).

output_mode 'single' returns argmax_c p; 'multi' returns every c with p(c | x) >= MULTI_RATIO * max_c p.

AI_FILTER has no embedding answer: a yes/no question over arbitrary text is not a nearest-prototype decision
(on 20 complaint/praise reviews, the question against its negation scored 0.35; yes/no hypotheses 0.70), so it
needs a completion model (`engines.duckdb.ai.functions`).

Similarity (AI_SIMILARITY on the embedded e5 model). e5's cosines are anisotropic: any two texts sit high
(unrelated Reddit comments vs HotpotQA questions: median 0.74, p99 0.79; unrelated Reddit comments: median
0.81; paraphrases 0.95-0.97), where Cortex's score reads like a plain cosine. The score is the cosine moved so
that unrelated text sits near 0, and clipped to Cortex's range:

    score(a, b) = 1                                                     when a == b (as text)
                = clip((cos(a, b) - SIMILARITY_BASELINE) / (1 - SIMILARITY_BASELINE), -1, 1)   otherwise

with SIMILARITY_BASELINE = 0.78: unrelated text -0.2..0.2, paraphrases 0.8..0.9, identical text exactly 1.0
(the raw cosine of a text with itself is 1 +- 3e-7). The map is monotone, so thresholds tuned on probed scores
keep their order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from coco_sql.numerics import softmax

TAU_LABEL = 0.01
TAU_EXAMPLE = 0.05
K_NEIGHBOURS = 20
ALPHA = 0.25
MULTI_RATIO = 0.7
SIMILARITY_BASELINE = 0.78  # e5 cosine of unrelated text: maps to a score of 0 (module docstring)


def class_probabilities(
    inputs: np.ndarray,
    prototypes: np.ndarray,
    examples: np.ndarray | None = None,
    example_labels: np.ndarray | None = None,
) -> np.ndarray:
    """p(c | x) of the module docstring: inputs (n, d), prototypes (C, d), examples (m, d) with a multi-hot
    (m, C) label matrix. Returns (n, C)."""
    p = softmax(inputs @ prototypes.T / TAU_LABEL, axis=1)
    if examples is None or example_labels is None or len(examples) == 0:
        return p
    similarity = inputs @ examples.T
    k = min(K_NEIGHBOURS, len(examples))
    nearest = np.argpartition(-similarity, k - 1, axis=1)[:, :k] if k < len(examples) else None
    if nearest is None:
        nearest = np.broadcast_to(np.arange(len(examples)), (len(inputs), len(examples)))
    weights = softmax(np.take_along_axis(similarity, nearest, axis=1) / TAU_EXAMPLE, axis=1)
    votes = np.einsum("nk,nkc->nc", weights, example_labels[nearest])
    weight = example_weight(len(examples))
    return (1.0 - weight) * p + weight * votes


def example_weight(m: int) -> float:
    """w of the module docstring: the examples' share of p(c | x), 1 - ALPHA from K_NEIGHBOURS examples on."""
    return (1.0 - ALPHA) * min(1.0, m / K_NEIGHBOURS)


def decide(probabilities: np.ndarray, labels: Sequence[str], multi: bool) -> list[list[str]]:
    """The labels each row gets (see the module docstring); ties keep the categories' order."""
    if not multi:
        singles = [[label] for label in labels]
        return [singles[i] for i in probabilities.argmax(axis=1).tolist()]
    chosen = probabilities >= MULTI_RATIO * probabilities.max(axis=1, keepdims=True)
    patterns: dict[bytes, list[str]] = {}  # rows share few label sets: build each once
    out = []
    for row in chosen:
        key = row.tobytes()
        if key not in patterns:
            patterns[key] = [labels[c] for c in np.flatnonzero(row)]
        out.append(patterns[key])
    return out


def similarity_score(cosines: np.ndarray, identical: np.ndarray) -> np.ndarray:
    """score(a, b) of the module docstring, for e5 cosines and a mask of pairs whose texts are equal."""
    scaled = (cosines.astype(np.float64) - SIMILARITY_BASELINE) / (1.0 - SIMILARITY_BASELINE)
    return np.where(identical, 1.0, np.clip(scaled, -1.0, 1.0))


SENTIMENTS = ("positive", "negative", "neutral", "mixed")
SENTIMENT_PROTOTYPES = {
    "positive": "a positive, happy, approving statement",
    "negative": "a negative, unhappy, critical statement",
    "neutral": "a neutral, factual statement without emotion",
    "mixed": "a statement with both positive and negative feelings",
}


def sentiment_scores(inputs: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """p(sentiment | x) over SENTIMENTS, (n, 4)."""
    return softmax(inputs @ prototypes.T / TAU_LABEL, axis=1)
