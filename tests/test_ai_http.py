"""The HTTP providers and the call pool, driven through real sockets against FakeEndpoint.

Timing asserts are one-sided (the limiter and Retry-After can only make things later) or generous upper bounds
that a broken implementation misses by seconds, so they hold on a loaded 2-core machine.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from llm_double import TEMPLATE_TOKENS_PER_MESSAGE, FakeEndpoint, Fault, vector_for

from coco_sql.errors import (
    CallCancelled,
    ProviderError,
    ProviderRateLimited,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeout,
    ProviderUnavailable,
)
from coco_sql.llm.execution import CallPool, TokenBucket, backoff_delay
from coco_sql.llm.providers.anthropic import AnthropicProvider
from coco_sql.llm.providers.base import (
    NO_DEADLINE,
    CompletionRequest,
    CompletionResult,
    Deadline,
    Message,
    ProviderLimits,
    estimate_tokens,
)
from coco_sql.llm.providers.openai_compat import OpenAICompatibleProvider, parse_retry_after

LABEL_SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["positive", "negative"]}},
    "required": ["label"],
}
FAST = ProviderLimits(concurrency=4, timeout_s=5.0, max_retries=3, backoff_s=0.01, max_backoff_s=0.05)


def ask(text: str = "hello", *, system: str | None = None, **options: object) -> CompletionRequest:
    messages = ((Message("system", system),) if system else ()) + (Message("user", text),)
    return CompletionRequest("test-model", messages, **options)  # type: ignore[arg-type]


def completions(
    provider: OpenAICompatibleProvider | AnthropicProvider, n: int
) -> list[Callable[[Deadline], CompletionResult]]:
    return [lambda d, i=i: provider.complete(ask(f"row {i}"), d) for i in range(n)]


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- OpenAI-compatible completions and embeddings --------------------------------------------------------------


def test_completion_returns_reply_and_reported_usage() -> None:
    with FakeEndpoint(api_key="sk-test") as endpoint:
        provider = OpenAICompatibleProvider(endpoint.base_url, api_key="sk-test")
        result = provider.complete(
            ask("Is it late?", system="Be brief.", temperature=0.0, max_tokens=20), NO_DEADLINE
        )
        sent = endpoint.requests

    assert result.text == "reply to: Is it late?"
    assert result.input_tokens == estimate_tokens("Be brief.") + estimate_tokens("Is it late?") + 2 * 3
    assert result.output_tokens == estimate_tokens(result.text) > 0
    assert result.model == "test-model" and result.latency_ms > 0
    assert [r.path for r in sent] == ["/v1/chat/completions"]
    assert sent[0].headers["authorization"] == "Bearer sk-test"
    assert sent[0].body == {
        "model": "test-model",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Is it late?"}],
        "temperature": 0.0,
        "max_tokens": 20,
    }


def test_missing_usage_falls_back_to_estimates() -> None:
    with FakeEndpoint(usage=False) as endpoint:
        result = OpenAICompatibleProvider(endpoint.base_url).complete(ask("count my tokens"), NO_DEADLINE)
    assert result.input_tokens == estimate_tokens("count my tokens")  # no template overhead: an estimate
    assert result.output_tokens == estimate_tokens(result.text)


def test_api_key_never_appears_in_errors_or_repr() -> None:
    with FakeEndpoint(api_key="the-right-key") as endpoint:
        provider = OpenAICompatibleProvider(endpoint.base_url, api_key="sk-secret-123")
        with pytest.raises(ProviderResponseError, match="HTTP 401") as caught:
            provider.complete(ask(), NO_DEADLINE)
    assert "sk-secret" not in str(caught.value) and "sk-secret" not in repr(provider)


def test_response_schema_is_sent_as_json_object_format_and_answer_parses() -> None:
    with FakeEndpoint() as endpoint:
        result = OpenAICompatibleProvider(endpoint.base_url).complete(
            ask("great product", response_schema=LABEL_SCHEMA), NO_DEADLINE
        )
        sent = endpoint.requests[0].body
    assert sent["response_format"] == {"type": "json_object", "schema": LABEL_SCHEMA}
    assert json.loads(result.text)["label"] in ("positive", "negative")


def test_embeddings_follow_input_order_and_are_normalised() -> None:
    texts = ["alpha", "beta", "gamma", "delta"]
    with FakeEndpoint() as endpoint:  # answers in reverse order, with indexes
        result = OpenAICompatibleProvider(endpoint.base_url).embed("embedder", texts, NO_DEADLINE)
        sent = endpoint.requests[0]
    expected = np.stack([vector_for(t) / np.linalg.norm(vector_for(t)) for t in texts])
    assert sent.path == "/v1/embeddings" and sent.body == {"model": "embedder", "input": texts}
    assert result.vectors.dtype == np.float32 and result.vectors.shape == (4, 8)
    np.testing.assert_allclose(result.vectors, expected, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=1), 1.0, rtol=1e-5)
    assert result.input_tokens == sum(estimate_tokens(t) for t in texts)


# -- Anthropic ------------------------------------------------------------------------------------------------


def test_anthropic_request_shape_and_parsing() -> None:
    with FakeEndpoint(api_key="ak-test") as endpoint:
        provider = AnthropicProvider(endpoint.root_url, api_key="ak-test")
        result = provider.complete(
            ask("Summarise this.", system="You are terse.", temperature=0.2), NO_DEADLINE
        )
        sent = endpoint.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "ak-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.body == {
        "model": "test-model",
        "max_tokens": 1024,
        "system": "You are terse.",
        "messages": [{"role": "user", "content": "Summarise this."}],
        "temperature": 0.2,
    }
    assert result.text == "reply to: Summarise this."
    expected_input = estimate_tokens("You are terse.") + estimate_tokens("Summarise this.")
    assert result.input_tokens == expected_input + 2 * TEMPLATE_TOKENS_PER_MESSAGE
    assert result.output_tokens == estimate_tokens(result.text)


def test_anthropic_schema_becomes_an_instruction_and_json_is_extracted() -> None:
    def chatty(turns: object) -> str:
        return 'Sure! Here it is:\n```json\n{"label": "negative"}\n```\nAnything else?'

    with FakeEndpoint(reply=chatty) as endpoint:
        provider = AnthropicProvider(endpoint.root_url, api_key="k")
        result = provider.complete(
            ask("awful", system="Classify.", response_schema=LABEL_SCHEMA), NO_DEADLINE
        )
        system = endpoint.requests[0].body["system"]
    assert json.loads(result.text) == {"label": "negative"}
    assert system.startswith("Classify.") and '"enum": ["positive", "negative"]' in system

    with FakeEndpoint(reply=lambda turns: "I cannot answer in JSON.") as endpoint:
        provider = AnthropicProvider(endpoint.root_url, api_key="k")
        with pytest.raises(ProviderResponseError, match="no JSON object"):
            provider.complete(ask("awful", response_schema=LABEL_SCHEMA), NO_DEADLINE)


# -- error mapping of one call ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "error", "retryable"),
    [
        (Fault.RATE_LIMITED, ProviderRateLimited, True),
        (Fault.SERVER_ERROR, ProviderServerError, True),
        (Fault.OVERLOADED, ProviderServerError, True),
        (Fault.CLOSE, ProviderServerError, True),
        (Fault.HANG, ProviderTimeout, True),
        (Fault.MALFORMED, ProviderResponseError, False),
    ],
)
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_faults_map_to_provider_errors(
    fault: Fault, error: type[ProviderError], retryable: bool, api: str
) -> None:
    with FakeEndpoint(faults=[fault], retry_after_s=0.25) as endpoint:
        if api == "openai":
            provider: OpenAICompatibleProvider | AnthropicProvider = OpenAICompatibleProvider(
                endpoint.base_url, timeout_s=0.3
            )
        else:
            provider = AnthropicProvider(endpoint.root_url, api_key="k", timeout_s=0.3)
        with pytest.raises(error) as caught:
            provider.complete(ask(), NO_DEADLINE)
    message = str(caught.value)
    assert type(caught.value) is error and caught.value.retryable is retryable
    assert message.startswith(f"AI provider {api!r}: ") and "\n" not in message and "127.0.0.1" in message
    if fault is Fault.RATE_LIMITED:
        assert caught.value.retry_after_s == pytest.approx(0.25)


def test_unknown_4xx_is_a_response_error() -> None:
    with FakeEndpoint() as endpoint:
        provider = OpenAICompatibleProvider(endpoint.base_url)
        with pytest.raises(ProviderResponseError, match=r"HTTP 400 from .*messages must be a non-empty list"):
            provider.complete(CompletionRequest("m", ()), NO_DEADLINE)


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_connections_are_kept_alive_and_a_closed_one_is_replaced() -> None:
    with FakeEndpoint(faults=[Fault.OK, Fault.OK, Fault.CLOSE]) as endpoint:
        provider = OpenAICompatibleProvider(endpoint.base_url)
        texts = [provider.complete(ask(f"q{i}"), NO_DEADLINE).text for i in range(4)]
        ports = [r.client_port for r in endpoint.requests]
        provider.close()
    # the server closed the kept-alive connection without answering request 2: it was sent again on a new one
    assert texts == [f"reply to: q{i}" for i in range(4)]
    assert len(ports) == 5 and ports[0] == ports[1] == ports[2] != ports[3] == ports[4]


def test_expired_deadline_sends_nothing() -> None:
    expired = Deadline.after(-1.0)
    with FakeEndpoint() as endpoint:
        with pytest.raises(CallCancelled):
            OpenAICompatibleProvider(endpoint.base_url).complete(ask(), expired)
        assert endpoint.request_count == 0


# -- the pool: retries -----------------------------------------------------------------------------------------


def test_pool_retries_429_after_retry_after() -> None:
    with (
        FakeEndpoint(faults=[Fault.RATE_LIMITED], retry_after_s=0.3) as endpoint,
        CallPool("openai", FAST) as pool,
    ):
        provider = OpenAICompatibleProvider(endpoint.base_url)
        run = pool.run_detailed(completions(provider, 1), Deadline.after(10))
        first, second = endpoint.requests
    assert isinstance(run.results[0], CompletionResult)
    assert (run.stats[0].attempts, run.stats[0].retries) == (2, 1)
    assert run.stats[0].backoff_s >= 0.3  # Retry-After (0.3 s) beats the 0.01 s backoff
    assert second.received_at - first.received_at >= 0.3


@pytest.mark.parametrize(
    ("api", "faults"),
    [
        ("openai", [Fault.SERVER_ERROR, Fault.SERVER_ERROR]),
        ("anthropic", [Fault.OVERLOADED, Fault.SERVER_ERROR]),
    ],
)
def test_pool_recovers_from_server_errors(api: str, faults: list[Fault]) -> None:
    with FakeEndpoint(faults=faults) as endpoint, CallPool(api, FAST) as pool:
        if api == "openai":
            provider: OpenAICompatibleProvider | AnthropicProvider = OpenAICompatibleProvider(
                endpoint.base_url
            )
        else:
            provider = AnthropicProvider(endpoint.root_url, api_key="k")
        run = pool.run_detailed(completions(provider, 1), Deadline.after(10))
        count = endpoint.request_count
    assert isinstance(run.results[0], CompletionResult) and run.results[0].text == "reply to: row 0"
    assert run.stats[0].retries == 2 and count == 3


def test_pool_gives_up_after_max_retries_with_one_line_message() -> None:
    limits = ProviderLimits(concurrency=1, max_retries=2, backoff_s=0.01)
    with FakeEndpoint(faults=lambda n: Fault.SERVER_ERROR) as endpoint, CallPool("openai", limits) as pool:
        results = pool.run(completions(OpenAICompatibleProvider(endpoint.base_url), 1), Deadline.after(10))
        count = endpoint.request_count
    url = f"{endpoint.base_url}/chat/completions"
    assert (
        str(results[0])
        == f"AI provider 'openai': HTTP 500 from {url}: internal server error after 3 attempts"
    )
    assert isinstance(results[0], ProviderServerError) and count == 3


def test_malformed_json_is_a_row_error_without_retries() -> None:
    limits = ProviderLimits(concurrency=1, backoff_s=0.01)
    with FakeEndpoint(faults=[Fault.OK, Fault.MALFORMED]) as endpoint, CallPool("openai", limits) as pool:
        run = pool.run_detailed(
            completions(OpenAICompatibleProvider(endpoint.base_url), 3), Deadline.after(10)
        )
        count = endpoint.request_count
    assert isinstance(run.results[0], CompletionResult) and isinstance(run.results[2], CompletionResult)
    assert isinstance(run.results[1], ProviderResponseError) and "malformed JSON" in str(run.results[1])
    assert run.stats[1].attempts == 1 and count == 3


def test_hang_times_out_then_retry_succeeds() -> None:
    limits = ProviderLimits(concurrency=1, timeout_s=0.3, backoff_s=0.01)
    with FakeEndpoint(faults=[Fault.HANG], hang_s=20) as endpoint, CallPool("openai", limits) as pool:
        started = time.monotonic()
        run = pool.run_detailed(
            completions(OpenAICompatibleProvider(endpoint.base_url), 1), Deadline.after(10)
        )
        elapsed = time.monotonic() - started
    assert isinstance(run.results[0], CompletionResult)
    assert run.stats[0].attempts == 2 and 0.3 <= elapsed < 5


def test_non_provider_exceptions_propagate() -> None:
    def broken(deadline: Deadline) -> str:
        raise RuntimeError("bug in a call")

    with CallPool("openai", FAST) as pool, pytest.raises(RuntimeError, match="bug in a call"):
        pool.run([lambda d: "fine", broken], Deadline.after(5))


# -- the pool: dead endpoints, deadlines, cancellation ---------------------------------------------------------


def test_dead_endpoint_is_unavailable_quickly_and_stops_the_run() -> None:
    provider = OpenAICompatibleProvider(f"http://127.0.0.1:{unused_port()}/v1")
    started_calls: list[int] = []

    def counted(i: int) -> Callable[[Deadline], CompletionResult]:
        def call(deadline: Deadline) -> CompletionResult:
            started_calls.append(i)
            return provider.complete(ask(), deadline)

        return call

    limits = ProviderLimits(concurrency=2, max_retries=4, backoff_s=0.5)
    with CallPool("openai", limits) as pool:
        started = time.monotonic()
        run = pool.run_detailed([counted(i) for i in range(20)], Deadline.after(30))
        elapsed = time.monotonic() - started
    assert all(isinstance(r, ProviderUnavailable) for r in run.results)
    assert "cannot connect to http://127.0.0.1:" in str(run.results[-1])
    assert len(started_calls) <= limits.concurrency  # no more calls started once the endpoint was found dead
    assert run.total().retries == 0 and elapsed < 2


def test_deadline_cancels_every_call_promptly() -> None:
    limits = ProviderLimits(concurrency=4, timeout_s=30)
    with FakeEndpoint(latency_s=5.0) as endpoint, CallPool("openai", limits) as pool:
        provider = OpenAICompatibleProvider(endpoint.base_url)
        started = time.monotonic()
        results = pool.run(completions(provider, 8), Deadline.after(0.5))
        elapsed = time.monotonic() - started
    assert all(isinstance(r, CallCancelled) for r in results)
    assert "deadline" in str(results[0])
    assert 0.45 <= elapsed < 1.2


def test_deadline_does_not_wait_for_calls_that_ignore_it() -> None:
    release = threading.Event()

    def stubborn(deadline: Deadline) -> str:
        release.wait(10)  # ignores its deadline, like a socket read with a long timeout
        return "late"

    with CallPool("openai", ProviderLimits(concurrency=2)) as pool:
        started = time.monotonic()
        results = pool.run([stubborn] * 4, Deadline.after(0.3))
        elapsed = time.monotonic() - started
        release.set()
    assert all(isinstance(r, CallCancelled) for r in results)
    assert elapsed < 1.0


def test_cancel_stops_a_running_batch() -> None:
    deadline = Deadline.after(30)
    limits = ProviderLimits(concurrency=2, timeout_s=30)
    with FakeEndpoint(latency_s=5.0) as endpoint, CallPool("openai", limits) as pool:
        threading.Timer(0.2, deadline.cancel).start()
        started = time.monotonic()
        results = pool.run(completions(OpenAICompatibleProvider(endpoint.base_url), 6), deadline)
        elapsed = time.monotonic() - started
    assert all(isinstance(r, CallCancelled) and "cancelled" in str(r) for r in results)
    assert elapsed < 1.0


def test_pool_can_run_again_after_a_deadline() -> None:
    with FakeEndpoint() as endpoint, CallPool("openai", FAST) as pool:
        provider = OpenAICompatibleProvider(endpoint.base_url)
        assert all(
            isinstance(r, CallCancelled) for r in pool.run(completions(provider, 3), Deadline.after(-1))
        )
        results = pool.run(completions(provider, 3), Deadline.after(10))
    assert [r.text for r in results if isinstance(r, CompletionResult)] == [
        f"reply to: row {i}" for i in range(3)
    ]


# -- the pool: limits ------------------------------------------------------------------------------------------


def test_concurrency_limit_is_respected() -> None:
    limits = ProviderLimits(concurrency=3)
    with FakeEndpoint(latency_s=0.2) as endpoint, CallPool("openai", limits) as pool:
        results = pool.run(completions(OpenAICompatibleProvider(endpoint.base_url), 9), Deadline.after(20))
        in_flight = endpoint.max_in_flight
    assert all(isinstance(r, CompletionResult) for r in results)
    assert in_flight == 3


def test_a_caller_thread_pool_runs_each_call_on_the_calling_thread_with_retries() -> None:
    """Snowpark's session inside a procedure belongs to its thread: such a provider's calls never leave it."""
    limits = ProviderLimits(concurrency=1, backoff_s=0.01, caller_thread=True)
    threads: list[int] = []
    with FakeEndpoint(faults=[Fault.SERVER_ERROR]) as endpoint, CallPool("cortex", limits) as pool:
        provider = OpenAICompatibleProvider(endpoint.base_url)
        calls = [
            (lambda d, c=c: (threads.append(threading.get_ident()), c(d))[1])
            for c in completions(provider, 3)
        ]
        run = pool.run_detailed(calls, Deadline.after(10))
    assert [r.text for r in run.results] == [f"reply to: row {i}" for i in range(3)]  # type: ignore[union-attr]
    assert set(threads) == {threading.get_ident()} and len(threads) == 4 and run.stats[0].retries == 1


def test_requests_per_minute_spaces_requests() -> None:
    limits = ProviderLimits(concurrency=8, requests_per_minute=240)  # 4 per second, at most 4 at once
    started = time.monotonic()
    with FakeEndpoint() as endpoint, CallPool("openai", limits) as pool:
        run = pool.run_detailed(
            completions(OpenAICompatibleProvider(endpoint.base_url), 8), Deadline.after(20)
        )
        arrivals = sorted(r.received_at - started for r in endpoint.requests)
    assert all(isinstance(r, CompletionResult) for r in run.results)
    # the k-th request (from 0) cannot arrive before (k - 3) / 4 s: the bucket holds 4 and refills 4 per second
    assert all(arrivals[k] >= (k - 3) / 4 for k in range(4, 8)), arrivals
    assert sum(1 for t in arrivals if t < 0.5) <= 6
    assert run.total().rate_wait_s >= 0.25 + 0.5 + 0.75 + 1.0 - 0.1


def test_tokens_per_minute_needs_token_estimates() -> None:
    with CallPool("openai", ProviderLimits(tokens_per_minute=1000)) as pool:
        with pytest.raises(ValueError, match="tokens-per-minute"):
            pool.run([lambda d: 1], Deadline.after(5))
        assert pool.run([lambda d: 1, lambda d: 2], Deadline.after(5), tokens=[10, 10]) == [1, 2]


def test_token_bucket_reservations() -> None:
    now = [0.0]
    bucket = TokenBucket(60, clock=lambda: now[0])  # 1 per second, holds 1
    assert [bucket.reserve(1) for _ in range(3)] == [0.0, 1.0, 2.0]
    now[0] = 3.0
    assert bucket.reserve(1) == 0.0
    big = TokenBucket(600, clock=lambda: now[0])  # 10 per second, holds 10
    assert big.reserve(25) == pytest.approx(1.5)  # larger than the bucket: delayed, not refused


def test_backoff_is_deterministic_exponential_and_honours_retry_after() -> None:
    limits = ProviderLimits(backoff_s=0.5, max_backoff_s=4.0)
    delays = [backoff_delay(limits, seed=7, call_index=3, attempt=a) for a in range(6)]
    assert delays == [backoff_delay(limits, seed=7, call_index=3, attempt=a) for a in range(6)]
    for attempt, delay in enumerate(delays):
        base = min(4.0, 0.5 * 2**attempt)
        assert 0.5 * base <= delay <= base
    assert backoff_delay(limits, 7, 3, 0) != backoff_delay(limits, 7, 4, 0)  # jitter differs per call
    assert backoff_delay(limits, 7, 3, 0, retry_after_s=9.0) == 9.0
    assert backoff_delay(limits, 7, 3, 5, retry_after_s=0.1) == delays[5]
