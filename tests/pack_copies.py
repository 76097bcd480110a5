"""Small copies of the shipped task packs, for tests that need a real pack but not all of its rows."""

from __future__ import annotations

import csv
from pathlib import Path

TASKS = Path(__file__).resolve().parent.parent / "tasks"


def small_pack(root: Path, name: str, pool_rows: int, test_rows: int = 10) -> Path:
    """A copy of pack `name` under `root` with its first rows only (same seed program, task.toml and labels)."""
    source, pack = TASKS / name, root / name
    (pack / "data").mkdir(parents=True)
    for file, rows in (("pool.csv", pool_rows), ("test.csv", test_rows)):
        with (source / "data" / file).open(encoding="utf-8") as original:
            lines = list(csv.reader(original))[: rows + 1]
        with (pack / "data" / file).open("w", newline="", encoding="utf-8") as copy:
            csv.writer(copy, lineterminator="\n").writerows(lines)
    for file in ("task.toml", "seed.sql"):
        (pack / file).write_text((source / file).read_text(encoding="utf-8"), encoding="utf-8")
    return pack
