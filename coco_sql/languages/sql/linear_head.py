"""The learned linear head (issue 38): a multinomial logistic regression over the embeddings of a task's
training texts, its weights in a reference table that programs read beside `examples`.

    linear_head(input_column VARCHAR, fold INTEGER, label VARCHAR, bias DOUBLE, weights FLOAT[])

One model per text input column, label and fold: fold 0 is fitted on every training row, fold k (1..K) on the
training rows outside fold k. A training row's fold is its place among the training ids in sorted order, mod K,
plus 1 (`fold_of`): SQL computes it from `examples` as `MOD(ROW_NUMBER() OVER (ORDER BY id) - 1, K) + 1`, so a
training row is always answered by the model that did not see it (its training predictions are out of fold,
as the proxy's vote and centroid head are leave-one-out), and any other row by fold 0.

The fit (`fit_head`), per fold, on the L2-normalised vectors AI_EMBED returns:

    standardise each dimension by the fold's mean and standard deviation;
    minimise  mean_i CE(softmax(W x_i + b), y_i) + lambda / 2 |W|^2      (L-BFGS, at most MAX_ITER steps)
    y_i: the row's labels spread evenly over them (a multi-label row counts 1/|labels| for each);
    the standardisation is folded into the stored weights and bias, so SQL needs only one inner product.

lambda is chosen by K-fold cross-validation on the training rows: the grid point with the least out-of-fold
cross-entropy (a proper scoring rule: it rates the probabilities, not a threshold, so it serves single- and
multi-label contracts alike; ties go to the stronger regularisation). Nothing is fitted on validation or test
rows. Everything is deterministic: the folds come from the sorted ids, L-BFGS from zero.

Why a table and not literals: 384 weights per label is 3 KB of SQL per label; a table keeps the program small
and ships with the export as `examples` does. The weights are fitted on the vectors of the model that answered
AI_EMBED during the search: in Snowflake, with Cortex's embedding model, they would have to be fitted again
(the export says so, as it does for the proxy's genes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from coco_sql.tasks import TaskPack

LINEAR_HEAD = "linear_head"
EXAMPLE_VECTORS = "example_vectors"
VECTOR_COLUMNS = {"input_column": "VARCHAR", "id": "VARCHAR", "v": "FLOAT[]"}
"""The training rows' vectors (`example_vectors`): what the proxy's vote and centroid head read instead of
embedding every `examples` row on every query (a deployed pipeline embeds them once, with the table)."""
FOLDS = 5
LAMBDAS = (0.01, 0.03, 0.1, 0.3, 1.0)
MAX_ITER = 100
COLUMNS = {
    "input_column": "VARCHAR",
    "fold": "INTEGER",
    "label": "VARCHAR",
    "bias": "DOUBLE",
    "weights": "FLOAT[]",
}
CATEGORICAL = frozenset({"VARCHAR", "VARCHAR[]"})

Embed = Callable[[Sequence[str]], np.ndarray]
"""L2-normalised embeddings of texts, (n, dim), by the run's embedding model."""


def head_columns(task: TaskPack) -> dict[str, dict[str, str]]:
    """The head's table schema when `task` can have one: a categorical contract (VARCHAR or VARCHAR[]), a text
    input column, and AI_EMBED enabled; else nothing."""
    if (
        task.contract.type.strip().upper() not in CATEGORICAL
        or "AI_EMBED" not in task.allowed_functions
        or not text_columns(task)
    ):
        return {}
    return {LINEAR_HEAD: dict(COLUMNS), EXAMPLE_VECTORS: dict(VECTOR_COLUMNS)}


def text_columns(task: TaskPack) -> list[str]:
    """The task's VARCHAR input columns, in order."""
    return [name for name, kind in task.input_columns.items() if kind.strip().upper() in ("VARCHAR", "TEXT")]


def fold_of(ids: Sequence[str], folds: int = FOLDS) -> dict[str, int]:
    """Each training id's fold, 1..folds: its place among the sorted ids, mod folds, plus 1 (module docstring)."""
    return {i: position % folds + 1 for position, i in enumerate(sorted(set(ids)))}


def label_sets(expected: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Each training row's labels (a list for a multi-label row, one label otherwise; None: no label)."""
    found: dict[str, tuple[str, ...]] = {}
    for i, value in expected.items():
        if isinstance(value, list | tuple):
            found[str(i)] = tuple(str(v) for v in value)
        elif value is None:
            found[str(i)] = ()
        else:
            found[str(i)] = (str(value),)
    return found


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _fit_one(x: np.ndarray, target: np.ndarray, lam: float, start: np.ndarray | None) -> np.ndarray:
    """W and b (as one (d + 1, C) array, the bias last) minimising the mean cross-entropy + lambda/2 |W|^2."""
    from scipy.optimize import minimize

    n, d = x.shape
    c = target.shape[1]
    xb = np.hstack([x, np.ones((n, 1))])

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        theta = flat.reshape(d + 1, c)
        z = xb @ theta
        z -= z.max(axis=1, keepdims=True)
        log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        loss = -(target * log_p).sum() / n + lam / 2 * float((theta[:d] ** 2).sum())
        grad = xb.T @ (np.exp(log_p) - target) / n
        grad[:d] += lam * theta[:d]
        return loss, grad.ravel()

    x0 = np.zeros((d + 1) * c) if start is None else start.ravel()
    found = minimize(objective, x0, jac=True, method="L-BFGS-B", options={"maxiter": MAX_ITER, "gtol": 1e-4})
    return found.x.reshape(d + 1, c)


def _standardised(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean = x.mean(axis=0)
    std = x.std(axis=0) + 1e-6
    return (x - mean) / std, mean, std


def _raw(theta: np.ndarray, mean: np.ndarray, std: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The weights (d, C) and bias (C) over raw vectors of a fit over standardised ones."""
    d = len(mean)
    weights = theta[:d] / std[:, None]
    bias = theta[d] - (mean / std) @ theta[:d]
    return weights, bias


def fit_head(
    ids: Sequence[str], vectors: np.ndarray, labels: Sequence[tuple[str, ...]], folds: int = FOLDS
) -> tuple[list[str], dict[int, tuple[np.ndarray, np.ndarray]], float]:
    """(the labels, fold -> (weights (d, C), bias (C)) over raw vectors, the chosen lambda): the module
    docstring's fit. Rows without a label are left out."""
    keep = [k for k, row in enumerate(labels) if row]
    names = sorted({label for k in keep for label in labels[k]})
    x = np.asarray(vectors, dtype=np.float64)[keep]
    kept_ids = [str(ids[k]) for k in keep]
    target = np.zeros((len(keep), len(names)))
    column = {label: j for j, label in enumerate(names)}
    for row, k in enumerate(keep):
        for label in set(labels[k]):
            target[row, column[label]] = 1.0 / len(set(labels[k]))
    assigned = fold_of(kept_ids, folds)
    fold = np.array([assigned[i] for i in kept_ids])
    present = [f for f in range(1, folds + 1) if (fold == f).any() and (fold != f).any()]
    losses: dict[float, float] = {}
    fitted: dict[tuple[float, int], np.ndarray] = {}
    starts: dict[int, np.ndarray | None] = {f: None for f in present}
    for lam in sorted(LAMBDAS, reverse=True):  # strong to weak: each fit starts from the stronger one's
        total = 0.0
        for f in present:
            inside, held = fold != f, fold == f
            xs, mean, std = _standardised(x[inside])
            theta = _fit_one(xs, target[inside], lam, starts[f])
            starts[f] = theta
            fitted[(lam, f)] = _raw(theta, mean, std)  # type: ignore[assignment]
            w, b = fitted[(lam, f)]  # type: ignore[misc]
            p = _softmax(x[held] @ w + b)
            total += -float((target[held] * np.log(np.maximum(p, 1e-300))).sum())
        losses[lam] = total
    chosen = min(sorted(LAMBDAS, reverse=True), key=lambda lam: losses[lam]) if present else LAMBDAS[-1]
    xs, mean, std = _standardised(x)
    models = {0: _raw(_fit_one(xs, target, chosen, None), mean, std)}
    for f in present:
        models[f] = fitted[(chosen, f)]  # type: ignore[assignment]
    return names, models, chosen


def head_rows(
    column: str, names: Sequence[str], models: Mapping[int, tuple[np.ndarray, np.ndarray]]
) -> list[dict[str, Any]]:
    """The table's rows for one input column's fits."""
    rows = []
    for fold in sorted(models):
        weights, bias = models[fold]
        for j, label in enumerate(names):
            rows.append(
                {
                    "input_column": column,
                    "fold": fold,
                    "label": label,
                    "bias": float(bias[j]),
                    "weights": [float(v) for v in weights[:, j].astype(np.float32)],
                }
            )
    return rows


def head_table(task: TaskPack, embed: Embed | None) -> pd.DataFrame:
    """The `linear_head` table of `task` (module docstring): empty when the task has none or `embed` is None
    (no embedding model here: a program that reads the head then gets no answer from it)."""
    return reference_rows(task, embed)[LINEAR_HEAD]


def reference_rows(task: TaskPack, embed: Embed | None) -> dict[str, pd.DataFrame]:
    """{LINEAR_HEAD: the head's rows, EXAMPLE_VECTORS: the training rows' vectors} of `task` (empty tables
    when it has none or `embed` is None)."""
    empty = pd.DataFrame({name: pd.Series(dtype=object) for name in COLUMNS})
    no_vectors = pd.DataFrame({name: pd.Series(dtype=object) for name in VECTOR_COLUMNS})
    if not head_columns(task) or embed is None:
        return {LINEAR_HEAD: empty, EXAMPLE_VECTORS: no_vectors}
    train = task.split("train")
    ids = [str(i) for i in train.inputs["id"]]
    labels = label_sets(train.expected)
    gold = [labels.get(i, ()) for i in ids]
    rows: list[dict[str, Any]] = []
    stored: list[dict[str, Any]] = []
    for column in text_columns(task):
        texts = [str(t) for t in train.inputs[column]]
        if len(texts) < 2 or len({g for row in gold for g in row}) < 2:
            continue
        vectors = embed(texts)
        stored.extend(
            {"input_column": column, "id": i, "v": [float(x) for x in np.asarray(v, dtype=np.float32)]}
            for i, v in zip(ids, vectors, strict=True)
        )
        names, models, _ = fit_head(ids, vectors, gold)
        rows.extend(head_rows(column, names, models))
    if not rows:
        return {LINEAR_HEAD: empty, EXAMPLE_VECTORS: no_vectors}
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    table["fold"] = table["fold"].astype("int32")
    return {LINEAR_HEAD: table, EXAMPLE_VECTORS: pd.DataFrame(stored, columns=list(VECTOR_COLUMNS))}


def embed_model(dialect: str) -> str:
    """The embedding model a program's AI_EMBED names in `dialect` (the proxy's: its engine's `AiBinding`, Cortex's
    in Snowflake SQL, which a local run maps to the embedded model)."""
    from coco_sql.plugins import engine

    return engine(dialect).ai.embed_model


def runtime_embed(runtime: Any, dialect: str) -> Embed:
    """`Embed` over an `llm.runtime.AiRuntime`, with the model `embed_model` names; its work is not accounted
    in any evaluation (the table is a property of the task, like `examples`)."""
    from coco_sql.llm.usage import Usage

    model = embed_model(dialect)

    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(runtime.embed("AI_EMBED", list(texts), model, usage=Usage()))

    return embed


def head_tables(task: TaskPack, ai: Any, memo: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """{LINEAR_HEAD: its rows, EXAMPLE_VECTORS: the training rows' vectors} for a runner of `task` (nothing
    when the task has no head); `ai`: the runner's
    `core.ai_table.LocalFunctions` (None: the table is empty), `memo`: the caller's rows by `digest`, so that
    each split's runner and every minibatch sample reuse one fit."""
    if not head_columns(task):
        return {}
    runtime = getattr(ai, "runtime", None)
    if runtime is None:
        return reference_rows(task, None)
    return embedded_tables(task, runtime_embed(runtime, task.dialect), memo)


def embedded_tables(task: TaskPack, embed: Embed, memo: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """`head_tables` with the vectors from `embed` (the embedded model's, or a warehouse's own AI_EMBED: the
    head is fitted on the vectors the programs' AI_EMBED gives where they run), cached in `memo`."""
    if not head_columns(task):
        return {}
    key = digest(task, embed_model(task.dialect))
    if key not in memo:
        memo[key] = reference_rows(task, embed)
    return dict(memo[key])


def digest(task: TaskPack, model: str) -> str:
    """What the head table of `task` depends on: its training rows, text columns, contract and the model."""
    train = task.split("train")
    payload = {
        "model": model,
        "columns": text_columns(task),
        "type": task.contract.type,
        "rows": [
            [str(i), *(str(train.inputs[c].iloc[k]) for c in text_columns(task))]
            for k, i in enumerate(train.inputs["id"])
        ],
        "labels": {str(k): v for k, v in label_sets(train.expected).items()},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


__all__ = [
    "COLUMNS",
    "EXAMPLE_VECTORS",
    "FOLDS",
    "LINEAR_HEAD",
    "digest",
    "embed_model",
    "embedded_tables",
    "fit_head",
    "fold_of",
    "head_columns",
    "head_rows",
    "head_table",
    "head_tables",
    "reference_rows",
    "runtime_embed",
    "text_columns",
]
