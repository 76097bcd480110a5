"""Likely label errors among the training rows (issue 38): rows whose label disagrees with their neighbours and
that no program solves.

A training row is flagged when all of these hold:

1. it has a label, and at least NEIGHBOURS other training rows exist;
2. its neighbours disagree: of its NEIGHBOURS nearest other training rows (cosine of their embeddings), one
   label M that it does not hold is held by at least half, and by at least DOMINANCE times as many as hold any
   of its own labels (a clear local majority for another label; not "none of its labels": label errors come in
   groups, a class of rows mislabelled alike, and each is then among the others' neighbours);
3. no program solves it: every program's score on it is below 1 (`unsolved`). A row that some program gets
   right is not flagged, however odd its neighbourhood.

Both signals together: a rare label alone has few neighbours of its own (rule 2 can hold for a correct row), and
a hard row alone fails every program (rule 3), but a row that both sits among another label's rows and that no
program answers as labelled is what a flipped label looks like. The rule reads only training rows.

Flagged rows are never few-shot examples and never counted when a guard is fitted (`languages.sql.mutate`),
and a run's flags are stored in the table `label_errors` at its end and shown in the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NEIGHBOURS = 10
DOMINANCE = 4


@dataclass(frozen=True)
class LabelSuspect:
    """One flagged row: its position among the rows given, the label its neighbours hold, and their share."""

    index: int
    neighbours_label: str
    share: float


def neighbour_disagreement(
    golds: Sequence[Sequence[str]], vectors: np.ndarray, k: int = NEIGHBOURS
) -> dict[int, tuple[str, float]]:
    """{row: (the other label its neighbours hold, their share)} for the rows rule 2 holds for. `vectors`:
    the rows' L2-normalised embeddings, in order."""
    n = len(golds)
    if n <= k or vectors.shape[0] != n:
        return {}
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    nearest = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
    found: dict[int, tuple[str, float]] = {}
    for i, gold in enumerate(golds):
        own = set(gold)
        if not own:
            continue
        counts: dict[str, int] = {}
        shared = 0
        for j in nearest[i]:
            labels = set(golds[int(j)])
            shared += bool(labels & own)
            for label in labels - own:
                counts[label] = counts.get(label, 0) + 1
        if not counts:
            continue
        label, count = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        if count >= k / 2 and count >= DOMINANCE * shared:
            found[i] = (label, count / k)
    return found


def likely_errors(
    golds: Sequence[Sequence[str]], vectors: np.ndarray, unsolved: Sequence[bool], k: int = NEIGHBOURS
) -> list[LabelSuspect]:
    """The rows rules 1-3 flag (module docstring), in order. `unsolved[i]`: no program solves row i."""
    return [
        LabelSuspect(i, label, share)
        for i, (label, share) in sorted(neighbour_disagreement(golds, vectors, k).items())
        if unsolved[i]
    ]


__all__ = ["DOMINANCE", "NEIGHBOURS", "LabelSuspect", "likely_errors", "neighbour_disagreement"]
