"""Benchmark: how close CallPool + OpenAICompatibleProvider get to the concurrency bound C / L (target >= 90%).

Run from the repository root:
``python bench/bench_ai_endpoint.py [--calls N] [--latency L] [--concurrency C] [--repeat R]``.
N completions go through a `CallPool` with C workers to a local `FakeEndpoint` that answers each request after L
seconds, over real HTTP. With no overhead, C calls finish every L seconds, so the bound is C / L calls per second;
the gap is the client, pool and server cost per call (all in this one process, sharing the GIL).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coco_sql.errors import ProviderError
from coco_sql.llm.execution import CallPool
from coco_sql.llm.providers.base import CompletionRequest, Deadline, Message, ProviderLimits
from coco_sql.llm.providers.openai_compat import OpenAICompatibleProvider

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from llm_double import FakeEndpoint  # the test double lives with the tests, not in the package


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
    parser.add_argument("--repeat", "-r", type=int, default=3, help="runs, each with a fresh endpoint (3)")
    args = parser.parse_args(argv)
    if min(args.calls, args.concurrency, args.repeat) < 1 or args.latency <= 0:
        parser.error("--calls, --concurrency and --repeat must be >= 1 and --latency > 0")

    bound = args.concurrency / args.latency
    print(f"{args.calls} calls, latency {args.latency * 1000:g} ms, concurrency {args.concurrency}")
    print(f"bound C / L = {bound:.1f} calls/s (target >= 90% of it)\n")
    print(f"{'run':>3}  {'wall s':>7}  {'calls/s':>8}  {'ratio':>6}  {'errors':>6}  {'peak in flight':>14}")
    rates = []
    for run in range(1, args.repeat + 1):
        elapsed, errors, peak = measure(args.calls, args.latency, args.concurrency)
        rates.append(args.calls / elapsed)
        print(
            f"{run:>3}  {elapsed:>7.2f}  {rates[-1]:>8.1f}  {rates[-1] / bound:>6.1%}  {errors:>6}  {peak:>14}"
        )
    median = statistics.median(rates)
    print(f"\nmedian {median:.1f} calls/s = {median / bound:.1%} of the bound; best {max(rates) / bound:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
