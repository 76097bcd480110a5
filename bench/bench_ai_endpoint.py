"""Benchmark: how close CallPool + OpenAICompatibleProvider get to the concurrency bound C / L (target >= 90%).

Run: ``python bench/bench_ai_endpoint.py [--calls N] [--latency L] [--concurrency C]`` from the repository root.
N completions go through a `CallPool` with C workers to a local `FakeEndpoint` that answers each request after L
seconds, over real HTTP. With no overhead, C calls finish every L seconds, so the bound is C / L calls per second;
the gap is the client, pool and server cost per call (all in this one process, sharing the GIL).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coco_sql.aifuncs.execution import CallPool
from coco_sql.aifuncs.providers.base import CompletionRequest, Deadline, Message, ProviderLimits
from coco_sql.aifuncs.providers.openai_compat import OpenAICompatibleProvider
from coco_sql.aifuncs.testing import FakeEndpoint
from coco_sql.errors import ProviderError


def measure(calls: int, latency: float, concurrency: int) -> tuple[float, int, int]:
    """Seconds for `calls` completions, the number that failed, and the endpoint's peak requests in flight."""
    limits = ProviderLimits(concurrency=concurrency, timeout_s=30.0)
    with FakeEndpoint(latency_s=latency) as endpoint, CallPool("bench", limits) as pool:
        provider = OpenAICompatibleProvider(endpoint.base_url, name="bench")
        requests = [CompletionRequest("bench-model", (Message("user", f"row {i}"),)) for i in range(calls)]
        pool.run(
            [lambda d: provider.complete(requests[0], d)], Deadline.after(30)
        )  # warm-up: threads, imports
        batch = [lambda d, r=r: provider.complete(r, d) for r in requests]
        started = time.perf_counter()
        results = pool.run(batch, Deadline.after(600))
        elapsed = time.perf_counter() - started
        peak = endpoint.max_in_flight
    return elapsed, sum(isinstance(r, ProviderError) for r in results), peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", "-n", type=int, default=400, help="completions per run (default 400)")
    parser.add_argument(
        "--latency", "-l", type=float, default=0.05, help="endpoint latency in seconds (0.05)"
    )
    parser.add_argument("--concurrency", "-c", type=int, default=16, help="calls in flight at once (16)")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.latency <= 0 or args.concurrency < 1:
        parser.error("--calls and --concurrency must be >= 1 and --latency > 0")

    elapsed, errors, peak = measure(args.calls, args.latency, args.concurrency)
    bound = args.concurrency / args.latency
    achieved = args.calls / elapsed
    rows = [
        ("calls", f"{args.calls}"),
        ("latency L", f"{args.latency * 1000:.0f} ms"),
        ("concurrency C", f"{args.concurrency} (peak seen by endpoint: {peak})"),
        ("errors", f"{errors}"),
        ("wall time", f"{elapsed:.2f} s"),
        ("bound C / L", f"{bound:.1f} calls/s"),
        ("achieved", f"{achieved:.1f} calls/s"),
        ("ratio", f"{achieved / bound:.1%} (target >= 90%)"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
