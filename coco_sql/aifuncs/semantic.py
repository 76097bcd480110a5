"""Decisions from embeddings: how the embedded backend answers AI_CLASSIFY, AI_FILTER and AI_SENTIMENT.

Pure numpy over L2-normalised vectors (cosine = dot product). The constants were chosen once on the goemotions
VALIDATION rows (never test) and are fixed: the second classification pack checks they are not tuned to one
dataset.

Classification (AI_CLASSIFY with categories c = 1..C, each a label and optional description, and optional
labelled examples):

    p_label(c | x) = softmax_c( cos(x, e_c) / TAU_LABEL )            e_c: embedding of "label: description"
    p_ex(c | x)    = sum_{i in kNN_K(x)} w_i [c in labels_i],        w = softmax_i( cos(x, x_i) / TAU_EXAMPLE )
    p(c | x)       = p_label                                         without examples
                   = ALPHA p_label + (1 - ALPHA) p_ex                with examples

output_mode 'single' returns argmax_c p; 'multi' returns every c with p(c | x) >= MULTI_RATIO * max_c p.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TAU_LABEL = 0.01
TAU_EXAMPLE = 0.05
K_NEIGHBOURS = 20
ALPHA = 0.25
MULTI_RATIO = 0.7
FILTER_MARGIN = (
    0.0  # AI_FILTER: TRUE when the text is nearer the predicate than its negation by more than this
)


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


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
    return ALPHA * p + (1.0 - ALPHA) * votes


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


def filter_decisions(inputs: np.ndarray, predicate: np.ndarray, negation: np.ndarray) -> np.ndarray:
    """AI_FILTER on embeddings: TRUE where cos(x, predicate) - cos(x, negation) > FILTER_MARGIN.

    The negation ('not: <predicate>') calibrates the raw cosine, which sits in a narrow band for any text."""
    return (inputs @ predicate - inputs @ negation) > FILTER_MARGIN


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
