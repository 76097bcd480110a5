"""Generate the data of the tsp_construct task pack (PACE's TSP-Construct, after LLM4AD's instance generator).

Every instance is n points drawn uniformly from the unit square, rounded to 4 decimals (the rounded points are
the instance). Its expected value is the length of its Euclidean minimum spanning tree, a lower bound on the
optimal tour's length (a tour minus one edge is a spanning tree), which the `bound_ratio` scorer divides by
the program's tour length.

- data/pool.csv: 64 instances at n = 50 (ids n050_s000..n050_s063), split 32/32 into train and val by the pack;
- data/test.csv: 64 instances at each of n = 50, 200 and 500 (ids n050_000.., n200_000.., n500_000..).

Usage: python scripts/make_tsp_construct.py [--out tasks/tsp_construct/data]
Re-running with the defaults reproduces the committed files byte for byte.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

SEED = 20260510
POOL = ((50, 64),)  # (n, instances)
TEST = ((50, 64), (200, 64), (500, 64))
DECIMALS = 4


def points(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.round(rng.random((n, 2)), DECIMALS)


def mst_length(xy: np.ndarray) -> float:
    """Prim's algorithm on the complete Euclidean graph, O(n^2)."""
    n = len(xy)
    in_tree = np.zeros(n, dtype=bool)
    best = np.full(n, np.inf)
    best[0] = 0.0
    total = 0.0
    for _ in range(n):
        node = int(np.argmin(np.where(in_tree, np.inf, best)))
        total += best[node]
        in_tree[node] = True
        best = np.minimum(best, np.hypot(*(xy - xy[node]).T))
    return float(total)


def _array(values: np.ndarray) -> str:
    return "[" + ",".join(f"{v:.{DECIMALS}f}" for v in values) + "]"


def write(path: Path, rows: list[tuple[str, np.ndarray]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle, lineterminator="\n")
        out.writerow(["id", "n", "x", "y", "mst"])
        for instance_id, xy in rows:
            out.writerow([instance_id, len(xy), _array(xy[:, 0]), _array(xy[:, 1]), f"{mst_length(xy):.6f}"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("tasks/tsp_construct/data"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    pool = [(f"n{n:03d}_s{i:03d}", points(rng, n)) for n, count in POOL for i in range(count)]
    test = [(f"n{n:03d}_{i:03d}", points(rng, n)) for n, count in TEST for i in range(count)]
    write(args.out / "pool.csv", pool)
    write(args.out / "test.csv", test)
    print(f"wrote {len(pool)} pool and {len(test)} test instances to {args.out}")


if __name__ == "__main__":
    main()
