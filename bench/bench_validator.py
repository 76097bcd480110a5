"""Benchmark: how long validate_candidate takes on a realistic ~200-line candidate (target <= 100 ms).

Run: ``python bench/bench_validator.py [--runs N] [--dialect duckdb|snowflake]`` from the repository root.
The candidate is generated (CTEs, CASE branches, string functions, self-joins on ``input``) so its size is
representative of what the mutator produces after many generations; the first call is a warm-up.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.validate import validate_candidate

KEYWORDS = [
    "refund",
    "late",
    "broken",
    "thanks",
    "cancel",
    "invoice",
    "password",
    "shipping",
    "login",
    "damaged",
    "charge",
]
LABELS = ["billing", "delivery", "account", "praise", "other"]


def build_candidate(keywords: list[str] = KEYWORDS) -> str:
    """A ~200-line candidate: feature CTEs per keyword, a scoring CTE, a joined CASE ladder, a final pick."""
    features = []
    for i, word in enumerate(keywords):
        features.append(
            f"""f{i} AS (
    SELECT
        id,
        CASE
            WHEN strpos(lower(text), '{word}') > 0 THEN 2
            WHEN regexp_matches(lower(text), '{word[:4]}[a-z]*') THEN 1
            ELSE 0
        END AS hit_{i},
        length(trim(text)) AS len_{i}
    FROM input
    WHERE text IS NOT NULL
)"""
        )
    feature_sql = ",\n".join(features)
    joins = "\n".join(f"    LEFT JOIN f{i} ON f{i}.id = b.id" for i in range(len(keywords)))
    hits = ",\n".join(f"        coalesce(f{i}.hit_{i}, 0) AS h{i}" for i in range(len(keywords)))
    ladder = "\n".join(
        f"            WHEN s.h{i} >= 2 AND s.h{(i + 1) % len(keywords)} = 0 THEN '{LABELS[i % len(LABELS)]}'"
        for i in range(len(keywords))
    )
    return f"""WITH
base AS (
    SELECT
        id,
        lower(replace(replace(text, chr(10), ' '), chr(9), ' ')) AS clean,
        split_part(text, ' ', 1) AS first_word,
        substring(text, 1, 80) AS head,
        n
    FROM input
),
{feature_sql},
scores AS (
    SELECT
        b.id,
        b.clean,
        b.first_word,
        b.head,
        b.n,
{hits}
    FROM base AS b
{joins}
),
ranked AS (
    SELECT
        s.*,
        row_number() OVER (PARTITION BY s.first_word ORDER BY s.n DESC, s.id) AS rank_in_word,
        count(*) OVER (PARTITION BY s.first_word) AS words
    FROM scores AS s
)
SELECT
    s.id,
    CASE
{ladder}
        WHEN s.clean LIKE '%?%' AND length(s.head) < 40 THEN 'account'
        WHEN starts_with(s.first_word, 'thank') OR contains(s.clean, 'great') THEN 'praise'
        WHEN s.rank_in_word = 1 AND s.words > 3 THEN 'other'
        ELSE coalesce(nullif(upper(left(s.first_word, 1)), ''), 'other')
    END AS label
FROM ranked AS s
JOIN input AS i ON i.id = s.id
ORDER BY s.id"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--no-freeze", action="store_true", help="do not gc.freeze() after warm-up")
    parser.add_argument("--dialect", choices=["duckdb", "snowflake"], default="duckdb")
    args = parser.parse_args()

    spec = ValidationSpec(
        input_columns={"text": "VARCHAR", "n": "INTEGER"}, output_column="label", dialect=args.dialect
    )
    source = build_candidate()
    validate_candidate(source, spec)  # warm-up: imports, sqlglot dialect setup
    if not args.no_freeze:  # as the coco-sql command does after start-up (cli.main)
        gc.collect()
        gc.freeze()
    timings_ms = []
    for _ in range(args.runs):
        start = time.perf_counter()
        validate_candidate(source, spec)
        timings_ms.append((time.perf_counter() - start) * 1000)
    timings_ms.sort()
    p95 = timings_ms[min(len(timings_ms) - 1, round(0.95 * (len(timings_ms) - 1)))]
    print(f"dialect={args.dialect} lines={source.count(chr(10)) + 1} runs={args.runs}")
    print(f"median={statistics.median(timings_ms):.1f} ms  p95={p95:.1f} ms  (target <= 100 ms)")


if __name__ == "__main__":
    main()
