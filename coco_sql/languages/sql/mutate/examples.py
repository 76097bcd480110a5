"""Few-shot examples as a small, diverse subset of the training rows, never hundreds inline (issue 15, part 3).

Every example is written into the program and, on a real model, sent with every row: a program that carries all
300 training rows is a 100 KB query and 150k input tokens per 1,000 rows. So an edit adds at most
`MAX_EXAMPLES` examples, chosen as follows:

- quotas per label proportional to how often it is a row's first gold label (largest remainder), so the
  examples keep the training rows' label prior; the embedded classifier votes among an input's nearest
  examples, and a label-balanced set overrules the prior. Measured on the embedded model (validation rows,
  16 examples, mean of 5 draws): hotpotqa_type 0.78 proportional vs 0.49 one-per-label round robin;
  goemotions 0.35 proportional vs 0.28 round robin;
- inside each label, the rows nearest the centres of a spherical k-means over their embeddings (medoids): they
  cover the label's kinds of text without the outliers that farthest-first picks (goemotions, 16 examples:
  0.36 medoids, 0.34 farthest-first, 0.35 random). Without embeddings, a random draw inside each label.

Every choice draws from the injected RNG (k-means starts, the random fallback), so a proposal stays a pure
function of (request, data, RNG) and different seeds try different subsets. Only training rows are candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

MAX_EXAMPLES = 16
KMEANS_ROUNDS = 10

Vectors = Mapping[str, np.ndarray]  # input text -> L2-normalised embedding


class Labelled(Protocol):
    """A training row as the choice sees it (`ai_edits.TrainingRow` is one)."""

    @property
    def text(self) -> str: ...

    @property
    def gold(self) -> tuple[str, ...]: ...


Row = TypeVar("Row", bound=Labelled)


@dataclass(frozen=True)
class Example:
    """An example already in a program's config, as a row."""

    text: str
    gold: tuple[str, ...]


def label_quotas(rows: Sequence[Row], k: int) -> dict[str, tuple[list[Row], int]]:
    """Each first gold label's rows and its share of `k` (largest remainder; ties go to the more frequent label,
    then the label's name), labels sorted. A row without labels counts under ''."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.gold[0] if row.gold else "", []).append(row)
    raw = {label: k * len(members) / len(rows) for label, members in groups.items()}
    quota = {label: int(np.floor(share)) for label, share in raw.items()}
    leftover = sorted(groups, key=lambda label: (-(raw[label] - quota[label]), -len(groups[label]), label))
    for label in leftover[: k - sum(quota.values())]:
        quota[label] += 1
    return {label: (groups[label], quota[label]) for label in sorted(groups)}


def medoids(rows: Sequence[Row], k: int, rng: np.random.Generator, vectors: Vectors | None) -> list[Row]:
    """`k` of `rows`: the row nearest each centre of a spherical k-means over their embeddings, or a random
    draw when a row has no embedding. In the rows' order."""
    if k >= len(rows):
        return list(rows)
    if k <= 0:
        return []
    if vectors is None or any(row.text not in vectors for row in rows):
        return [rows[int(i)] for i in sorted(rng.choice(len(rows), size=k, replace=False))]
    points = np.stack([np.asarray(vectors[row.text], dtype=np.float32) for row in rows])
    centres = points[rng.choice(len(rows), size=k, replace=False)].copy()
    for _ in range(KMEANS_ROUNDS):
        nearest = np.argmax(points @ centres.T, axis=1)
        for j in range(k):
            members = points[nearest == j]
            if len(members):
                mean = members.mean(axis=0)
                centres[j] = mean / max(float(np.linalg.norm(mean)), 1e-12)
    chosen: set[int] = set()
    for j in range(k):
        for i in np.argsort(-(points @ centres[j]), kind="stable"):
            if int(i) not in chosen:
                chosen.add(int(i))
                break
    return [rows[i] for i in sorted(chosen)]


def diverse_subset(
    rows: Sequence[Row], k: int, rng: np.random.Generator, vectors: Vectors | None = None
) -> list[Row]:
    """At most `k` of `rows`: label quotas proportional to the rows' labels, medoids inside each label (see the
    module docstring). All of them when there are no more than `k`. Labels in sorted order."""
    if len(rows) <= k:
        return list(rows)
    chosen: list[Row] = []
    for members, quota in label_quotas(rows, k).values():
        chosen.extend(medoids(members, quota, rng, vectors))
    return chosen


def as_row(example: Any) -> Example | None:
    """An example of a config ({input, labels, ...}) as a row, or None if malformed."""
    if not isinstance(example, Mapping) or not isinstance(example.get("input"), str):
        return None
    labels = example.get("labels") or []
    return Example(example["input"], tuple(str(v) for v in labels) if isinstance(labels, list) else ())


def capped(
    existing: Sequence[Any],
    added: Sequence[Row],
    rng: np.random.Generator,
    vectors: Vectors | None = None,
    limit: int = MAX_EXAMPLES,
) -> tuple[list[Any], list[Row]]:
    """What a few-shot edit keeps, at most `limit` in all: (the existing examples kept, as given; the rows added).

    When the added rows alone reach the limit, a diverse subset of them and the existing examples together (an
    edit that offers every training row re-draws the whole set); else every added row, and the existing
    examples cut to a diverse subset of the room left. Malformed existing examples are dropped. A `limit` of 0
    or less is no limit: everything is kept (the offline mutator's default until examples can live in a table)."""
    known = [(example, row) for example in existing if (row := as_row(example)) is not None]
    if limit <= 0:
        return [e for e, _ in known], list(added)
    if len(added) >= limit:
        pool: list[Labelled] = [*added, *(row for _, row in known)]
        keep = {id(row) for row in diverse_subset(pool, limit, rng, vectors)}
        return [e for e, row in known if id(row) in keep], [row for row in added if id(row) in keep]
    room = diverse_subset([row for _, row in known], limit - len(added), rng, vectors)
    keep = {id(row) for row in room}
    return [e for e, row in known if id(row) in keep], list(added)


__all__ = ["MAX_EXAMPLES", "Example", "capped", "diverse_subset", "label_quotas", "medoids"]
