"""What the offline mutator needs of the learned linear head (`languages.sql.linear_head`): which input column a
call's head reads, and the head's out-of-fold probabilities on the training rows, in numpy from the table the
sandbox holds, so that the proxy's fit (`proxy_fit.fit`) can weigh the head against its other parts.

The probabilities are what the proxy's SQL computes (`proxy_sql._linear_ctes`): each training row answered by
the model of its fold, the fold its place among the sorted `examples` ids; the mutator then draft-tests the SQL
itself, so this copy only ranks genes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
from sqlglot import exp

from coco_sql.errors import EvaluationError
from coco_sql.languages.sql.linear_head import LINEAR_HEAD, fold_of, text_columns
from coco_sql.languages.sql.mutate.ai_edits import TrainingRow, classify_calls
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.tasks.references import EXAMPLES


def linear_column(query: exp.Expression, index: int, env: DraftEnvironment) -> str | None:
    """The text input column AI_CLASSIFY call `index` classifies, when it is one bare column with a head (the
    task enables AI_EMBED and has a categorical contract, and its programs run where the head's tables are),
    else None."""
    calls = classify_calls(query)
    if (
        index >= len(calls)
        or "AI_EMBED" not in env.allowed_functions
        or LINEAR_HEAD not in env.reference_tables
    ):
        return None
    call = calls[index]
    argument = call.this if isinstance(call, exp.AIClassify) else call.expressions[0]
    if not isinstance(argument, exp.Column):
        return None
    columns = {c.lower(): c for c in text_columns(env.task)}
    return columns.get(argument.name.lower())


def linear_probabilities(
    env: DraftEnvironment,
    column: str,
    rows: Sequence[TrainingRow],
    vectors: dict[str, np.ndarray],
    labels: Sequence[str],
) -> np.ndarray | None:
    """(n, C): the linear head's p of each label (in `labels`' order; 0 for a label the head has not) for each
    of `rows`, out of fold; None when the table is empty or a row has no vector."""
    if any(r.text not in vectors for r in rows):
        return None
    literal = exp.Literal.string(column).sql(SANDBOX_DIALECT)
    try:
        table = env.probe(
            f"SELECT fold, label, bias, weights FROM {LINEAR_HEAD} WHERE input_column = {literal}"
        ).rows
        ids = [str(i) for (i,) in env.probe(f"SELECT CAST(id AS VARCHAR) FROM {EXAMPLES}").rows]
    except EvaluationError:
        return None
    if not table:
        return None
    names = sorted({str(label) for _, label, _, _ in table})
    index = {label: j for j, label in enumerate(names)}
    models: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for fold in sorted({int(f) for f, _, _, _ in table}):
        members = [(index[str(label)], b, w) for f, label, b, w in table if int(f) == fold]
        members = [
            (j, b, json.loads(w) if isinstance(w, str) else w) for j, b, w in members
        ]  # a warehouse's ARRAY
        weights = np.zeros((len(next(iter(members))[2]), len(names)))
        bias = np.full(len(names), -np.inf)
        for j, b, w in members:
            weights[:, j] = np.asarray(w, dtype=np.float64)
            bias[j] = float(b)
        models[fold] = (weights, bias)
    folds = fold_of(ids)
    wanted = [index.get(label) for label in labels]
    found = np.zeros((len(rows), len(labels)))
    for k, row in enumerate(rows):
        weights, bias = models.get(folds.get(row.instance_id, 0), models[0])
        z = np.asarray(vectors[row.text], dtype=np.float64) @ weights + bias
        z = np.where(np.isfinite(z), z, -np.inf)
        # over the call's categories only, as the SQL keeps them
        kept = np.array([z[j] if j is not None else -np.inf for j in wanted])
        if not np.isfinite(kept).any():
            continue
        e = np.exp(kept - kept[np.isfinite(kept)].max())
        found[k] = e / e.sum()
    return found


__all__ = ["linear_column", "linear_probabilities"]
