"""Copy a small, fixed subset of GoEmotions into the goemotions task pack.

Reads the converted CSVs in ../shared/data/goemotions (only here, at generation time: the package never
reads ../shared at run time) and writes tasks/goemotions/data/{pool,test}.csv with columns id, text, labels
(label names joined with ';').

Usage: python scripts/make_goemotions.py [--source DIR] [--out DIR]
Re-running with the defaults reproduces the committed files byte for byte.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
import pandas as pd

POOL_SIZE = 900
TEST_SIZE = 600
SEED = 42

REPO = Path(__file__).resolve().parents[1]


def sample(source: Path, count: int, seed: int) -> pd.DataFrame:
    """``count`` rows drawn without replacement by a seeded permutation of the id-sorted file."""
    frame = pd.read_csv(source, dtype=str, keep_default_na=False)
    frame = frame.sort_values("id", kind="stable").reset_index(drop=True)
    chosen = np.sort(np.random.default_rng(seed).permutation(len(frame))[:count])
    return frame.iloc[chosen][["id", "text", "labels"]]


def write(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["id", "text", "labels"])
        writer.writerows(frame.itertuples(index=False, name=None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=REPO.parent / "shared" / "data" / "goemotions")
    parser.add_argument("--out", type=Path, default=REPO / "tasks" / "goemotions" / "data")
    args = parser.parse_args()
    pool = sample(args.source / "goemotions_train.csv", POOL_SIZE, SEED)
    test = sample(args.source / "goemotions_test.csv", TEST_SIZE, SEED + 1)
    write(pool, args.out / "pool.csv")
    write(test, args.out / "test.csv")
    print(f"wrote {args.out / 'pool.csv'} ({len(pool)} rows) and {args.out / 'test.csv'} ({len(test)} rows)")


if __name__ == "__main__":
    main()
