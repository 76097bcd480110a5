"""Small copies of the shipped task packs, for tests that need a real pack but not all of its rows."""

from __future__ import annotations

import csv
from pathlib import Path

TASKS = Path(__file__).resolve().parent.parent / "tasks"


def small_pack(root: Path, name: str, pool_rows: int, test_rows: int = 10) -> Path:
    """A copy of pack `name` under `root` with its first rows only (same seed program, task.toml, labels and,
    for a Python pack, harness)."""
    source, pack = TASKS / name, root / name
    (pack / "data").mkdir(parents=True)
    for file, rows in (("pool.csv", pool_rows), ("test.csv", test_rows)):
        with (source / "data" / file).open(encoding="utf-8") as original:
            lines = list(csv.reader(original))[: rows + 1]
        with (pack / "data" / file).open("w", newline="", encoding="utf-8") as copy:
            csv.writer(copy, lineterminator="\n").writerows(lines)
    for file in ("task.toml", "seed.sql", "seed.py", "harness.py"):
        if (source / file).exists():
            (pack / file).write_text((source / file).read_text(encoding="utf-8"), encoding="utf-8")
    return pack


def text_pack(
    root: Path,
    name: str,
    description: str,
    rows: list[tuple[str, str]],
    seed: str,
    allowed_functions: list[str],
    timeout_seconds: float,
) -> Path:
    """A Snowflake-dialect pack `name` under `root`: a `text` column labelled by `label` (exact match), the
    (text, label) `rows` as pool and test alike (ids p0.. and t0..), half of the pool for training."""
    pack = root / name
    (pack / "data").mkdir(parents=True)
    for file, prefix in (("pool.csv", "p"), ("test.csv", "t")):
        with (pack / "data" / file).open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["id", "text", "label"])
            writer.writerows((f"{prefix}{i}", text, label) for i, (text, label) in enumerate(rows))
    (pack / "seed.sql").write_text(seed, encoding="utf-8")
    functions = ", ".join(f'"{f}"' for f in allowed_functions)
    (pack / "task.toml").write_text(
        f"""name = "{name}"
description = "{description}"
dialect = "snowflake"

[data]
pool = "data/pool.csv"
test = "data/test.csv"
id_column = "id"
expected_column = "label"

[data.input_columns]
text = "VARCHAR"

[splits]
seed = 1
mode = "partition"
train_fraction = 0.5
test_fraction = 0.0

[contract]
output = "label"
type = "VARCHAR"

[scorer]
kind = "exact"

[program]
seed = "seed.sql"
allowed_functions = [{functions}]
timeout_seconds = {timeout_seconds}

[source]
name = "generated for tests"
url = "tests/pack_copies.py"
license = "Apache-2.0"
""",
        encoding="utf-8",
    )
    return pack


ECHO_HARNESS = "def run(entry, instance):\n    return entry(instance)\n"
OK_PROGRAM = "def main(instance):\n    return 1.0\n"


def planted_python_pack(root: Path) -> Path:
    """A Python pack `planted` under `root` whose program `main(instance)` is echoed by its harness: pool ids
    row_000..row_011 (6 train, 6 val with its splits), test ids TESTSECRET_000..003; every label >= 424242."""
    pack = root / "planted"
    (pack / "data").mkdir(parents=True)
    (pack / "data" / "pool.csv").write_text(
        "id,v,label\n" + "".join(f"row_{i:03d},{i},{424242 + i}\n" for i in range(12))
    )
    (pack / "data" / "test.csv").write_text(
        "id,v,label\n" + "".join(f"TESTSECRET_{i:03d},{i},{424242 + i}\n" for i in range(4))
    )
    (pack / "seed.py").write_text(OK_PROGRAM)
    (pack / "harness.py").write_text(ECHO_HARNESS)
    (pack / "task.toml").write_text(
        'name = "planted"\ndescription = "planted ids"\nlanguage = "python"\n'
        '[data]\npool = "data/pool.csv"\ntest = "data/test.csv"\nexpected_column = "label"\n'
        '[data.input_columns]\nv = "DOUBLE"\n[splits]\nseed = 3\ntrain_fraction = 0.5\n'
        '[contract]\noutput = "label"\ntype = "DOUBLE"\n[scorer]\nkind = "numeric"\n'
        '[program]\nseed = "seed.py"\nentry = "main"\nharness = "harness.py"\ntimeout_seconds = 20\n'
    )
    return pack
