"""Copy the RPT re-split of HotpotQA (distractor, hard) into the hotpotqa_type task pack.

Reads the converted CSVs in ../shared/data/hotpotqa (only here, at generation time: the package never
reads ../shared at run time), keeps only the columns id, question and type (the files also carry the
answer and large context columns, which are dropped), and writes tasks/hotpotqa_type/data/{pool,test}.csv
with columns id, question, label (label = HotpotQA's question type, `bridge` or `comparison`).

- pool.csv: all 300 RPT train rows + all 300 RPT dev rows (600), sorted by id.
- test.csv: all 500 RPT test rows, sorted by id.

Question text is copied verbatim (including any leading/trailing whitespace of the source).

Usage: python scripts/make_hotpotqa_type.py [--source DIR] [--out DIR]
Re-running with the defaults reproduces the committed files byte for byte.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import pandas as pd

LABELS = ("bridge", "comparison")
POOL_FILES = ("hotpotqa_distractor_train.csv", "hotpotqa_distractor_dev.csv")
TEST_FILES = ("hotpotqa_distractor_test.csv",)

REPO = Path(__file__).resolve().parents[1]


def load(source: Path, names: tuple[str, ...]) -> pd.DataFrame:
    """id, question, label from the named files, concatenated and sorted by id."""
    frames = [
        pd.read_csv(source / name, dtype=str, keep_default_na=False, usecols=["id", "question", "type"])
        for name in names
    ]
    frame = pd.concat(frames, ignore_index=True).rename(columns={"type": "label"})
    bad = sorted(set(frame["label"]) - set(LABELS))
    if bad:
        raise SystemExit(f"unexpected type values in {names}: {bad}")
    if not frame["id"].is_unique:
        raise SystemExit(f"duplicate ids in {names}")
    frame = frame.sort_values("id", kind="stable").reset_index(drop=True)
    return frame[["id", "question", "label"]]


def write(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["id", "question", "label"])
        writer.writerows(frame.itertuples(index=False, name=None))


def describe(frame: pd.DataFrame) -> str:
    counts = frame["label"].value_counts()
    return ", ".join(f"{label} {int(counts.get(label, 0))}" for label in LABELS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=REPO.parent / "shared" / "data" / "hotpotqa")
    parser.add_argument("--out", type=Path, default=REPO / "tasks" / "hotpotqa_type" / "data")
    args = parser.parse_args()
    pool = load(args.source, POOL_FILES)
    test = load(args.source, TEST_FILES)
    overlap = set(pool["id"]) & set(test["id"])
    if overlap:
        raise SystemExit(f"{len(overlap)} ids occur in both pool and test, e.g. {sorted(overlap)[0]}")
    write(pool, args.out / "pool.csv")
    write(test, args.out / "test.csv")
    print(f"wrote {args.out / 'pool.csv'} ({len(pool)} rows: {describe(pool)})")
    print(f"wrote {args.out / 'test.csv'} ({len(test)} rows: {describe(test)})")


if __name__ == "__main__":
    main()
