"""Running many calls of one provider: a thread pool, rate limits, retries with backoff, and the deadline.

Providers make one call at a time and raise `ProviderError`s (`llm.providers.base`); `CallPool` turns a batch
of such calls into one result per call, in input order:

- at most `limits.concurrency` calls in flight (one reusable thread pool per `CallPool`), or, with
  `limits.caller_thread`, one call at a time on the caller's own thread;
- requests and estimated tokens per minute held by token buckets that refill continuously and hold one second's
  worth (OpenAI enforces per-minute limits in such slices), so requests are spaced rather than bursted;
- retryable errors (429, 5xx, timeouts) retried up to `limits.max_retries` times after
  `min(max_backoff_s, backoff_s * 2**attempt) * jitter`, jitter in [0.5, 1.0) drawn from
  `numpy.random.default_rng((seed, call_index, attempt))`, or after the server's Retry-After when longer;
- every attempt gets a `Deadline` ending at its per-attempt limit (`limits.timeout_s`) or the run's deadline,
  whichever is first, and sharing the run's cancel flag; all waits go through `Deadline.sleep`;
- when the run's deadline passes or it is cancelled, every unfinished call returns `CallCancelled` at once
  (threads still inside a request finish when their socket timeout, itself cut to the deadline, fires);
- the first `ProviderUnavailable` (a dead endpoint) stops the run from starting further calls: they return that
  same error object, and the caller treats it as a run-level error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

import numpy as np

from coco_sql.errors import (
    CallCancelled,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
)
from coco_sql.llm.providers.base import Deadline, ProviderLimits

T = TypeVar("T")

_POLL_S = 0.05  # how often a waiting run looks at the cancel flag


@dataclass
class CallStats:
    """What one call cost: attempts sent, retries among them, and seconds spent waiting before attempts."""

    attempts: int = 0
    retries: int = 0
    rate_wait_s: float = 0.0  # held back by the requests/tokens-per-minute limiter
    backoff_s: float = 0.0  # sleeping between retries

    @property
    def wait_s(self) -> float:
        return self.rate_wait_s + self.backoff_s

    def __add__(self, other: CallStats) -> CallStats:
        return CallStats(
            self.attempts + other.attempts,
            self.retries + other.retries,
            self.rate_wait_s + other.rate_wait_s,
            self.backoff_s + other.backoff_s,
        )


@dataclass(frozen=True)
class PoolRun(Generic[T]):
    """The outcome of `CallPool.run_detailed`: `results[i]` and `stats[i]` belong to `calls[i]`."""

    results: list[T | ProviderError]
    stats: list[CallStats]

    def total(self) -> CallStats:
        return sum(self.stats, CallStats())


class TokenBucket:
    """A thread-safe token bucket refilled at `per_minute / 60` per second, holding one second's worth (>= 1).

    `reserve(amount)` takes `amount` at once, letting the level go negative, and returns how long the caller must
    wait before using it. Reservations are therefore first come, first served, and a request larger than the
    bucket is delayed, never refused.
    """

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute <= 0:
            raise ValueError(f"a rate limit must be positive, got {per_minute} per minute")
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self._clock = clock
        self._level = self.capacity
        self._updated = clock()
        self._lock = threading.Lock()

    def reserve(self, amount: float) -> float:
        """Take `amount` and return the seconds until it is covered (0.0 when it already is)."""
        with self._lock:
            now = self._clock()
            self._level = min(self.capacity, self._level + (now - self._updated) * self.rate)
            self._updated = now
            self._level -= amount
            return 0.0 if self._level >= 0 else -self._level / self.rate


class RateLimiter:
    """Requests-per-minute and tokens-per-minute buckets of one provider; either limit may be absent."""

    def __init__(self, limits: ProviderLimits) -> None:
        self._requests = TokenBucket(limits.requests_per_minute) if limits.requests_per_minute else None
        self._tokens = TokenBucket(limits.tokens_per_minute) if limits.tokens_per_minute else None

    def acquire(self, tokens: int, deadline: Deadline, provider: str) -> float:
        """Wait until one request of `tokens` tokens may be sent; return the seconds waited.

        Raises CallCancelled if the deadline passes or the run is cancelled while waiting.
        """
        delay = max(
            self._requests.reserve(1) if self._requests else 0.0,
            self._tokens.reserve(tokens) if self._tokens and tokens > 0 else 0.0,
        )
        if delay > 0:
            deadline.sleep(delay, provider)
        return delay


def backoff_delay(
    limits: ProviderLimits, seed: int, call_index: int, attempt: int, retry_after_s: float | None = None
) -> float:
    """Seconds to wait before retry number `attempt + 1` (attempt counts from 0). Deterministic for fixed inputs."""
    jitter = np.random.default_rng((seed, call_index, attempt)).uniform(0.5, 1.0)
    delay = min(limits.max_backoff_s, limits.backoff_s * 2**attempt) * float(jitter)
    return max(delay, retry_after_s) if retry_after_s is not None else delay


class _RunState:
    """What the calls of one run share: the first ProviderUnavailable, after which no call starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.unavailable: ProviderUnavailable | None = None

    def mark_unavailable(self, error: ProviderUnavailable) -> None:
        with self._lock:
            if self.unavailable is None:
                self.unavailable = error


class CallPool:
    """Runs batches of calls to one provider under its `ProviderLimits` (see the module docstring).

    Thread-safe: several runs may share one pool (and its limiter) at once. Its threads start on the first run
    and are reused until `close()`; the pool is also a context manager.
    """

    def __init__(self, provider_name: str, limits: ProviderLimits, seed: int = 0) -> None:
        if limits.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {limits.concurrency}")
        self.provider_name = provider_name
        self.limits = limits
        self.seed = seed
        self._limiter = RateLimiter(limits)
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> CallPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the threads; queued calls are dropped, calls in flight finish in the background."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def run(
        self,
        calls: Sequence[Callable[[Deadline], T]],
        deadline: Deadline,
        tokens: Sequence[int] | None = None,
    ) -> list[T | ProviderError]:
        """One result per call, in input order: its value, or the `ProviderError` that ended it.

        See `run_detailed`, which also returns per-call statistics.
        """
        return self.run_detailed(calls, deadline, tokens).results

    def run_detailed(
        self,
        calls: Sequence[Callable[[Deadline], T]],
        deadline: Deadline,
        tokens: Sequence[int] | None = None,
    ) -> PoolRun[T]:
        """Run every call (each is handed its attempt's `Deadline`) and return results and statistics.

        `tokens[i]` is call i's estimated input + requested output tokens, for the tokens-per-minute limit; it is
        required when that limit is set (ValueError otherwise, or when its length differs from `calls`).
        A call ends with its value; with `CallCancelled` when the deadline passed or the run was cancelled
        first; with the run's first `ProviderUnavailable`; or with its last error once that error is not
        retryable or `max_retries` retries are spent (the message then says after how many attempts).
        Exceptions other than `ProviderError` raised by a call are bugs: they propagate from here.
        """
        if tokens is not None and len(tokens) != len(calls):
            raise ValueError(f"got {len(tokens)} token estimates for {len(calls)} calls")
        if tokens is None and self.limits.tokens_per_minute:
            raise ValueError(f"provider {self.provider_name!r} has a tokens-per-minute limit: pass tokens")
        if not calls:
            return PoolRun([], [])
        state = _RunState()
        stats = [CallStats() for _ in calls]
        if self.limits.caller_thread:
            inline = [
                self._call(index, call, deadline, tokens[index] if tokens else 0, state, stats[index])
                for index, call in enumerate(calls)
            ]
            return PoolRun(inline, [replace(s) for s in stats])
        executor = self._ensure_executor()
        futures = [
            executor.submit(
                self._call, index, call, deadline, tokens[index] if tokens else 0, state, stats[index]
            )
            for index, call in enumerate(calls)
        ]
        self._wait(futures, deadline)
        unfinished = [future for future in futures if not future.done()]
        for future in unfinished:
            future.cancel()
        cancelled = self._cancelled(deadline) or CallCancelled(
            self.provider_name, "evaluation deadline passed"
        )
        results: list[T | ProviderError] = [
            future.result() if future.done() and not future.cancelled() else cancelled for future in futures
        ]
        return PoolRun(results, [replace(s) for s in stats])

    def _ensure_executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.limits.concurrency, thread_name_prefix=f"coco-ai-{self.provider_name}"
                )
            return self._executor

    @staticmethod
    def _wait(futures: list[Future[T | ProviderError]], deadline: Deadline) -> None:
        """Return when every future is done, the deadline passes, or the run is cancelled."""
        pending = set(futures)
        while pending and not deadline.cancelled.is_set():
            left = deadline.remaining()
            if left is not None and left <= 0:
                return
            _, pending = wait(pending, timeout=_POLL_S if left is None else min(_POLL_S, left))

    def _cancelled(self, deadline: Deadline) -> CallCancelled | None:
        try:
            deadline.check(self.provider_name)
        except CallCancelled as error:
            return error
        return None

    def _attempt_deadline(self, deadline: Deadline) -> Deadline:
        ends = time.monotonic() + self.limits.timeout_s
        if deadline.expires_at is not None:
            ends = min(ends, deadline.expires_at)
        return Deadline(ends, deadline.cancelled)

    def _call(
        self,
        index: int,
        call: Callable[[Deadline], T],
        deadline: Deadline,
        tokens: int,
        state: _RunState,
        stats: CallStats,
    ) -> T | ProviderError:
        """One call with its retries, on a pool thread."""
        attempt = 0
        while True:
            if state.unavailable is not None:
                return state.unavailable
            try:
                deadline.check(self.provider_name)
                stats.rate_wait_s += self._limiter.acquire(tokens, deadline, self.provider_name)
                if state.unavailable is not None:
                    return state.unavailable
                stats.attempts += 1
                return call(self._attempt_deadline(deadline))
            except ProviderUnavailable as error:
                state.mark_unavailable(error)
                return error
            except ProviderError as error:
                if (cancelled := self._cancelled(deadline)) is not None:
                    return cancelled
                failure = error
                if isinstance(error, CallCancelled):  # only the attempt's own time limit ran out
                    failure = ProviderTimeout(
                        self.provider_name, f"no answer within {self.limits.timeout_s:g} s"
                    )
            if not failure.retryable or attempt >= self.limits.max_retries:
                return _after_attempts(failure, stats.attempts)
            retry_after = failure.retry_after_s if isinstance(failure, ProviderRateLimited) else None
            delay = backoff_delay(self.limits, self.seed, index, attempt, retry_after)
            try:
                deadline.sleep(delay, self.provider_name)
            except CallCancelled as error:
                return error
            stats.backoff_s += delay
            stats.retries += 1
            attempt += 1


def _after_attempts(error: ProviderError, attempts: int) -> ProviderError:
    """`error`, its one-line message ending with "after N attempts" when there were several."""
    if attempts > 1:
        error.args = (f"{error} after {attempts} attempts",)
    return error
