"""Minibatch evaluation: Algorithm 1's T_t, a sample of the rows per iteration, with full validation for admission.

With `RunConfig.minibatch = m`, iteration t draws m validation rows and m training rows from the run's RNG stream
`MINIBATCH_STREAM` (so a resumed run draws the same rows); the training sample always holds the curator's target
rows. The mutator works on the training sample only: its environment (probes, draft tests, labels) is a sandbox
over those rows, so its cost per iteration does not grow with the table. The child then runs on both samples and
is compared with its parent on exactly those rows (the parent, an archive member, has every row scored). As in
GEPA, only a child that gains on its minibatch earns a full evaluation:

- better than the parent on the training sample (which holds the targets it was made for), and no worse on
  the validation sample: the child is evaluated on every training and validation row, as without minibatches,
  and may enter the archive or become the champion;
- otherwise it stops there. Its stored evaluations are the sampled rows only (2m rows instead of the whole
  pool), it is never admitted, and its ledger line compares it with the parent on the validation sample.

So the evaluations table grows by 2m rows per stopped child, and in full only for children that pass the gate.
Admission and the champion always rest on full validation scores.
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
    # where the sampled rows sit in their splits (to read the parent's scores on them)
    train_positions: tuple[int, ...]
    val_positions: tuple[int, ...]

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
        wanted = [k for k in dict.fromkeys(_position(train_ids, t) for t in targets) if k is not None][:size]
        rest = np.setdiff1d(np.arange(len(train_ids)), wanted, assume_unique=True)  # in split order
        drawn = (int(rest[k]) for k in _sample(len(rest), size - len(wanted), rng))
        train_positions = tuple(sorted({*wanted, *drawn}))
        return cls(
            tuple(train_ids[k] for k in train_positions),
            tuple(val_ids[k] for k in val_positions),
            train_positions,
            val_positions,
        )

    def ids(self, split: str) -> tuple[str, ...]:
        return self.train if split == "train" else self.val


@dataclass(frozen=True)
class Gate:
    """How a child fared on the sampled rows against its parent on the same rows (means over each sample)."""

    rows: int  # validation rows sampled
    child: float  # validation sample
    parent: float
    child_train: float  # training sample
    parent_train: float
    passed: bool

    def as_payload(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "child": self.child,
            "parent": self.parent,
            "child_train": self.child_train,
            "parent_train": self.parent_train,
            "full": self.passed,
        }


def evaluate_child(
    evaluator: Evaluator,
    code: str,
    batch: Minibatch,
    parent_train_rows: np.ndarray,
    parent_val_rows: np.ndarray,
) -> tuple[dict[str, Outcome], Gate]:
    """The child's outcomes under the minibatch rule (module docstring), and the gate's verdict."""
    train = evaluator.evaluate(code, "train", batch.train)
    val = evaluator.evaluate(code, "val", batch.val)
    parent_train = _mean(parent_train_rows, batch.train_positions)
    parent_val = _mean(parent_val_rows, batch.val_positions)
    passed = train.ok and val.ok and train.score > parent_train and val.score >= parent_val
    gate = Gate(len(batch.val), val.score, parent_val, train.score, parent_train, passed)
    if gate.passed:
        return {split: evaluator.evaluate(code, split) for split in SEARCH_SPLITS}, gate
    return {"train": train, "val": val}, gate


def _position(ids: Sequence[str], instance_id: str) -> int | None:
    """Where `instance_id` sits in `ids` (a scan: there are at most a handful of targets)."""
    try:
        return ids.index(instance_id)
    except ValueError:
        return None


def _mean(scores: np.ndarray, positions: tuple[int, ...]) -> float:
    return float(np.mean(scores[list(positions)])) if positions else 0.0


def _sample(n: int, size: int, rng: np.random.Generator) -> tuple[int, ...]:
    """`size` of the positions 0..n-1, in order (all of them when size >= n)."""
    if size <= 0:
        return ()
    if size >= n:
        return tuple(range(n))
    return tuple(int(k) for k in sorted(rng.choice(n, size=size, replace=False)))
