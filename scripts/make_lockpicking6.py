"""Generate the data of the lockpicking6 task pack (CoCoEvolve, Appendix G.1).

The twelve interference rules live only here (and in the tests), never under tasks/lockpicking6/, because
the search may read the pack directory and must discover the rules from labelled examples.

Usage: python scripts/make_lockpicking6.py [--out tasks/lockpicking6/data]
Re-running with the defaults reproduces the committed files byte for byte.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

#: Valid digits per position (P1..P6).
CANDIDATES: tuple[frozenset[int], ...] = (
    frozenset({1, 4, 7}),
    frozenset({2, 6, 8}),
    frozenset({0, 3, 9}),
    frozenset({1, 4, 7}),
    frozenset({0, 5, 8}),
    frozenset({2, 5, 9}),
)

#: (trigger position, trigger digit) -> positions it invalidates; 1-based, read on the original digits.
RULES: dict[tuple[int, int], tuple[int, int]] = {
    (1, 4): (2, 6),
    (1, 1): (3, 5),
    (2, 8): (1, 3),
    (2, 6): (4, 5),
    (3, 3): (1, 2),
    (3, 0): (4, 6),
    (4, 7): (2, 3),
    (4, 1): (5, 6),
    (5, 5): (1, 4),
    (5, 8): (2, 6),
    (6, 2): (1, 3),
    (6, 9): (4, 5),
}

POOL_SIZE = 50
TEST_SIZE = 2000
IN_SET_PROBABILITY = 0.85
POOL_SEED = 20240601
TEST_SEED = 20240602


def label(code: str) -> int:
    """Number of positions whose digit is in its candidate set and that no triggered rule invalidates."""
    digits = [int(c) for c in code]
    valid = [digits[i] in CANDIDATES[i] for i in range(6)]
    for (position, digit), targets in RULES.items():
        if digits[position - 1] == digit:
            for target in targets:
                valid[target - 1] = False
    return sum(valid)


def draw_code(rng: np.random.Generator) -> str:
    """Each digit is in its candidate set with probability 0.85 so that the rules' triggers show up often."""
    digits = []
    for candidates in CANDIDATES:
        pool = (
            sorted(candidates) if rng.random() < IN_SET_PROBABILITY else sorted(set(range(10)) - candidates)
        )
        digits.append(str(pool[int(rng.integers(len(pool)))]))
    return "".join(digits)


def write(path: Path, prefix: str, width: int, count: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["id", "code", "label"])
        for index in range(1, count + 1):
            code = draw_code(rng)
            writer.writerow([f"{prefix}{index:0{width}d}", code, label(code)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_out = Path(__file__).resolve().parents[1] / "tasks" / "lockpicking6" / "data"
    parser.add_argument("--out", type=Path, default=default_out, help="output directory")
    args = parser.parse_args()
    write(args.out / "pool.csv", "lp", 3, POOL_SIZE, POOL_SEED)
    write(args.out / "test.csv", "lt", 4, TEST_SIZE, TEST_SEED)
    print(f"wrote {args.out / 'pool.csv'} ({POOL_SIZE} rows) and {args.out / 'test.csv'} ({TEST_SIZE} rows)")


if __name__ == "__main__":
    main()
