"""Deterministic train/val/test assignment.

The assignment depends only on the set of pool ids and the seed: ids are sorted before a seeded
permutation is applied, so reordering the CSV (or re-exporting it from a warehouse) never moves an
instance between splits. That matters because a run stores the pack fingerprint and split seed and
expects ``--resume`` to see exactly the same val rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

SPLIT_NAMES: tuple[str, ...] = ("train", "val", "test")
SPLIT_MODES: tuple[str, ...] = ("partition", "shared")


@dataclass(frozen=True)
class Split:
    """One split of a task: what a candidate may see (``inputs``) and what it is scored against.

    ``inputs`` has the column ``id`` (str) followed by the declared input columns in their declared
    DuckDB types, sorted by id; it never contains the expected column. ``expected`` maps id to the
    expected value parsed to the contract type (``VARCHAR[]`` -> ``list[str]``).
    """

    name: str
    inputs: pd.DataFrame
    expected: dict[str, object]

    @property
    def ids(self) -> list[str]:
        """Instance ids in split order (sorted)."""
        return [str(i) for i in self.inputs["id"]]

    def __len__(self) -> int:
        return len(self.inputs)

    def subset(self, ids: Iterable[str]) -> Split:
        """The same split restricted to `ids` (a minibatch), in split order; ids it does not hold are ignored."""
        keep = set(ids)
        inputs = self.inputs[self.inputs["id"].astype(str).isin(keep)].reset_index(drop=True)
        return Split(self.name, inputs, {i: v for i, v in self.expected.items() if i in keep})


def partition_ids(
    ids: Iterable[str], seed: int, train_fraction: float, test_fraction: float = 0.0
) -> dict[str, list[str]]:
    """Partition ``ids`` into train/val/test by fractions; each returned list is sorted.

    ``round(n * fraction)`` rows go to train and test, the rest to val. The caller guarantees the
    fractions leave at least one row for each split it needs.
    """
    ordered = np.array(sorted(set(ids)), dtype=object)
    shuffled = ordered[np.random.default_rng(seed).permutation(len(ordered))].tolist()
    n = len(shuffled)
    n_test = round(n * test_fraction)
    n_train = round(n * train_fraction)
    test = shuffled[:n_test]
    train = shuffled[n_test : n_test + n_train]
    val = shuffled[n_test + n_train :]
    return {"train": sorted(train), "val": sorted(val), "test": sorted(test)}
