"""Minibatch evaluation: Algorithm 1's T_t, a sample of the rows per iteration, with full validation for admission.

With `RunConfig.minibatch = m`, iteration t draws m validation rows and m training rows from the run's RNG stream
`MINIBATCH_STREAM` (so a resumed run draws the same rows); the training sample always holds the curator's target
rows, which the mutator worked on. The child runs on the sampled validation rows first, and is compared with its
parent on exactly those rows (the parent, an archive member, has every validation row scored):

- no worse than the parent there: the child is evaluated on every training and validation row, as without
  minibatches, and may enter the archive or become the champion;
- worse: it stops there. Its stored evaluations are the sampled rows only (2m rows instead of the whole pool),
  it is never admitted, and its ledger line compares it with the parent on the sample.

So the evaluations table grows by at most 2m rows per rejected child, and in full only for children that reach
the full evaluation. Admission and the champion always rest on full validation scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from coco_sql.evaluate import SEARCH_SPLITS, Evaluator, Outcome


@dataclass(frozen=True)
class Minibatch:
    """The rows of one iteration's sample, per split (split order)."""

    train: tuple[str, ...]
    val: tuple[str, ...]
    val_positions: tuple[
        int, ...
    ]  # where the sampled validation rows sit in the split (for the parent's scores)

    @classmethod
    def draw(
        cls,
        size: int,
        train_ids: Sequence[str],
        val_ids: Sequence[str],
        targets: Sequence[str],
        rng: np.random.Generator,
    ) -> Minibatch | None:
        """`size` rows of each split (targets first among the training rows); None when that is every row."""
        if size >= len(train_ids) and size >= len(val_ids):
            return None
        val_positions = _sample(len(val_ids), size, rng)
        known = set(train_ids)
        wanted = [t for t in dict.fromkeys(targets) if t in known][:size]
        taken = set(wanted)
        rest = [i for i in train_ids if i not in taken]
        train = sorted({*wanted, *(rest[k] for k in _sample(len(rest), size - len(wanted), rng))})
        return cls(tuple(train), tuple(val_ids[k] for k in val_positions), val_positions)

    def ids(self, split: str) -> tuple[str, ...]:
        return self.train if split == "train" else self.val


@dataclass(frozen=True)
class Gate:
    """How a child fared on the sampled validation rows against its parent on the same rows."""

    rows: int
    child: float
    parent: float
    passed: bool

    def as_payload(self) -> dict[str, Any]:
        return {"rows": self.rows, "child": self.child, "parent": self.parent, "full": self.passed}


def evaluate_child(
    evaluator: Evaluator, code: str, batch: Minibatch, parent_val_rows: np.ndarray
) -> tuple[dict[str, Outcome], Gate]:
    """The child's outcomes under the minibatch rule (module docstring), and the gate's verdict."""
    sampled = evaluator.evaluate(code, "val", batch.val)
    parent = float(np.mean(parent_val_rows[list(batch.val_positions)])) if batch.val else 0.0
    gate = Gate(len(batch.val), sampled.score, parent, sampled.ok and sampled.score >= parent)
    if gate.passed:
        return {split: evaluator.evaluate(code, split) for split in SEARCH_SPLITS}, gate
    return {"train": evaluator.evaluate(code, "train", batch.train), "val": sampled}, gate


def _sample(n: int, size: int, rng: np.random.Generator) -> tuple[int, ...]:
    """`size` of the positions 0..n-1, in order (all of them when size >= n)."""
    if size <= 0:
        return ()
    if size >= n:
        return tuple(range(n))
    return tuple(int(k) for k in sorted(rng.choice(n, size=size, replace=False)))
