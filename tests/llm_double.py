"""`FakeEndpoint`: a real local HTTP server that speaks the OpenAI and Anthropic wire formats, for tests and benches.

It stands in for REMOTE providers only, and is driven through the real clients over real sockets:

- OpenAI: POST /v1/chat/completions, POST /v1/embeddings, GET /v1/models (bearer key checked when configured);
- Anthropic: POST /v1/messages (`x-api-key` checked when configured, `anthropic-version` and `max_tokens` required).

Everything is deterministic. A completion answers `reply(messages)` (default "reply to: <last user message>"; a
model named in `models` answers with its own reply function), or,
when `response_format` carries a schema, a JSON object built from the schema (enum values picked by a hash of the
prompt). Usage reports `estimate_tokens` of every message plus 3 per message (the chat template) as input and
`estimate_tokens(reply)` as output. Embeddings are `vector_for(text)` (seeded by a CRC of the text, NOT normalised)
and are answered in REVERSE order with their `index`, so a client that ignores the index is caught.

Each POST is numbered from 0 in arrival order; `faults` (a list, or a function of that number) decides what it gets:
a normal answer, 429 with Retry-After, 500, 529, 400 for a context-window overflow, a malformed JSON body, a hang,
or a closed connection. `latency_s`
delays every POST first. Every POST is recorded (`requests`), and the most POSTs in flight at once is kept.
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
import socket
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from coco_sql.llm.providers.base import estimate_tokens

TEMPLATE_TOKENS_PER_MESSAGE = 3
_REASONS = {status.value: status.phrase for status in HTTPStatus} | {529: "Overloaded"}


class Fault(enum.Enum):
    """What one POST gets instead of (or as) its normal answer."""

    OK = "ok"
    RATE_LIMITED = "429"  # with Retry-After / retry-after-ms of `retry_after_s`
    SERVER_ERROR = "500"
    OVERLOADED = "529"  # Anthropic's "overloaded_error"
    MALFORMED = "malformed"  # HTTP 200 with a body that is not JSON
    HANG = "hang"  # no answer for `hang_s` (or until the endpoint stops), then the connection closes
    CLOSE = "close"  # the connection closes without any answer
    CONTEXT_OVERFLOW = "400"  # the prompt is longer than the model's context window (each format's own error)


FaultScript = Sequence[Fault] | Callable[[int], Fault]
ReplyFn = Callable[[Sequence[Mapping[str, str]]], str]


@dataclass(frozen=True)
class Turn:
    """What a scripted model says: text, and tool calls as (name, arguments) pairs; a str `arguments` is sent
    as is (a model that writes malformed JSON)."""

    text: str = ""
    tool_calls: tuple[tuple[str, Mapping[str, Any] | str], ...] = ()


#: A scripted model: the conversation so far, in one neutral shape for both wire formats (role, content, and
#: `tool_calls` [(id, name, arguments)] or `tool_call_id`), and the tools offered (their names, or with
#: `full_tools` their {name, description, parameters}) -> its next turn.
ScriptFn = Callable[[list[dict[str, Any]], list[Any]], Turn]


@dataclass(frozen=True)
class RecordedRequest:
    """One POST as the endpoint received it. Header names are lower-case; `body` is the decoded JSON or None."""

    number: int
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float  # time.monotonic()
    fault: Fault
    client_port: int  # tells kept-alive connections apart


def vector_for(text: str, dim: int = 8) -> np.ndarray:
    """The raw (not normalised) float32 embedding the endpoint returns for `text`."""
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    return (rng.normal(size=dim) * 3.0).astype(np.float32)


def default_reply(messages: Sequence[Mapping[str, str]]) -> str:
    """ "reply to: " and the last user message."""
    users = [m["content"] for m in messages if m.get("role") == "user"]
    return f"reply to: {users[-1] if users else ''}"


def example_for_schema(schema: Mapping[str, Any], key: str) -> Any:
    """A value valid for simple JSON Schemas (types, properties, enum, const, items, anyOf); `key` picks enums."""
    pick = zlib.crc32(key.encode())
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][pick % len(schema["enum"])]
    for union in ("anyOf", "oneOf"):
        if schema.get(union):
            return example_for_schema(schema[union][0], key)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: example_for_schema(sub, f"{key}/{name}") for name, sub in properties.items()}
    if kind == "array":
        return [example_for_schema(schema.get("items", {}), key)]
    return {"integer": pick % 10, "number": (pick % 100) / 10, "boolean": pick % 2 == 0, "null": None}.get(
        kind, f"text {pick % 1000}"
    )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    endpoint: FakeEndpoint


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive capable, like real endpoints
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.endpoint._track(self.connection, open_=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.endpoint._track(self.connection, open_=False)

    def do_GET(self) -> None:
        self.server.endpoint._get(self)

    def do_POST(self) -> None:
        self.server.endpoint._post(self)

    def send_json(self, status: int, document: Any, headers: Mapping[str, str] | None = None) -> None:
        self.send_raw(status, json.dumps(document).encode(), headers)

    def send_raw(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        """Status line, headers and body in ONE write: a second small write costs a wake-up per response."""
        reason = _REASONS.get(status, "Error")
        lines = [f"{self.protocol_version} {status} {reason}", "Content-Type: application/json"]
        lines += [f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)


class FakeEndpoint:
    """A local OpenAI/Anthropic-compatible HTTP server on 127.0.0.1 (see the module docstring).

    Use as a context manager (or `start()`/`stop()`). `base_url` is "http://127.0.0.1:PORT/v1" (for
    `OpenAICompatibleProvider`); `root_url` has no "/v1" (for `AnthropicProvider`). Thread-safe counters:
    `request_count`, `max_in_flight`, `requests`.
    """

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        faults: FaultScript | None = None,
        retry_after_s: float = 0.2,
        hang_s: float = 30.0,
        usage: bool = True,
        reply: ReplyFn = default_reply,
        api_key: str | None = None,
        model: str = "fake-model",
        embedding_dim: int = 8,
        script: ScriptFn | None = None,
        full_tools: bool = False,
        models: Mapping[str, ReplyFn] | None = None,
    ) -> None:
        self.latency_s = latency_s
        self.faults = faults
        self.retry_after_s = retry_after_s
        self.hang_s = hang_s
        self.usage = usage
        self.reply = reply
        self.api_key = api_key
        self.model = model
        self.embedding_dim = embedding_dim
        self.script = script
        self.full_tools = (
            full_tools  # the script gets each tool's {name, description, parameters}, not its name
        )
        self.models = dict(models or {})  # a chat request's model -> its reply (others: `reply`)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> FakeEndpoint:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.endpoint = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-endpoint", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; hanging and delayed requests are released and kept-alive connections closed at once."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeEndpoint:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeEndpoint is not started")
        return self._server.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    # -- counters ----------------------------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def max_in_flight(self) -> int:
        with self._lock:
            return self._max_in_flight

    def _track(self, connection: socket.socket, *, open_: bool) -> None:
        with self._lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    # -- serving -----------------------------------------------------------------------------------------------

    def _get(self, handler: _Handler) -> None:
        if handler.path.rstrip("/") in ("/v1/models", "/models"):
            handler.send_json(200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
        else:
            handler.send_json(404, {"error": {"message": f"no route {handler.path}", "type": "not_found"}})

    def _post(self, handler: _Handler) -> None:
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        record = self._record(handler, body)
        try:
            if self.latency_s > 0 and self._stopping.wait(self.latency_s):
                handler.close_connection = True
                return
            self._answer(handler, record)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _record(self, handler: _Handler, body: Any) -> RecordedRequest:
        with self._lock:
            number = len(self._requests)
            record = RecordedRequest(
                number=number,
                path=handler.path,
                headers={k.lower(): v for k, v in handler.headers.items()},
                body=body,
                received_at=time.monotonic(),
                fault=self._fault(number),
                client_port=handler.client_address[1],
            )
            self._requests.append(record)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        return record

    def _fault(self, number: int) -> Fault:
        if self.faults is None:
            return Fault.OK
        if callable(self.faults):
            return self.faults(number)
        return self.faults[number] if number < len(self.faults) else Fault.OK

    def _answer(self, handler: _Handler, record: RecordedRequest) -> None:
        anthropic = record.path.startswith("/v1/messages")
        match record.fault:
            case Fault.HANG:
                self._stopping.wait(self.hang_s)
                handler.close_connection = True
            case Fault.CLOSE:
                handler.close_connection = True
            case Fault.MALFORMED:
                handler.send_raw(200, b'{"choices": [{"message": ')
            case Fault.RATE_LIMITED:
                headers = {
                    "Retry-After": str(math.ceil(self.retry_after_s)),
                    "retry-after-ms": str(round(self.retry_after_s * 1000)),
                }
                handler.send_json(429, _error("rate_limit_error", "rate limit reached", anthropic), headers)
            case Fault.SERVER_ERROR:
                handler.send_json(500, _error("api_error", "internal server error", anthropic))
            case Fault.OVERLOADED:
                handler.send_json(529, _error("overloaded_error", "overloaded", anthropic))
            case Fault.CONTEXT_OVERFLOW:
                message = (
                    "prompt is too long: 210000 tokens > 200000 maximum"
                    if anthropic
                    else "This model's maximum context length is 8192 tokens. However, your messages resulted "
                    "in 9120 tokens. Please reduce the length of the messages."
                )
                kind = "invalid_request_error"
                handler.send_json(400, _error(kind, message, anthropic))
            case Fault.OK:
                self._route(handler, record)

    def _route(self, handler: _Handler, record: RecordedRequest) -> None:
        routes: dict[str, Callable[[Any], tuple[int, Any]]] = {
            "/v1/chat/completions": self._chat,
            "/v1/embeddings": self._embeddings,
            "/v1/messages": self._messages,
        }
        route = routes.get(record.path)
        anthropic = record.path == "/v1/messages"
        if route is None:
            handler.send_json(404, _error("not_found_error", f"no route {record.path}", anthropic))
        elif (denied := self._auth_error(record, anthropic)) is not None:
            handler.send_json(401, _error("authentication_error", denied, anthropic))
        elif not isinstance(record.body, dict):
            handler.send_json(400, _error("invalid_request_error", "body is not a JSON object", anthropic))
        else:
            if anthropic and "anthropic-version" not in record.headers:
                status, document = (
                    400,
                    _error("invalid_request_error", "anthropic-version header required", True),
                )
            else:
                status, document = route(record.body)
            handler.send_json(status, document)

    def _auth_error(self, record: RecordedRequest, anthropic: bool) -> str | None:
        if self.api_key is None:
            return None
        if anthropic:
            ok = record.headers.get("x-api-key") == self.api_key
        else:
            ok = record.headers.get("authorization") == f"Bearer {self.api_key}"
        return None if ok else "invalid API key"

    def _chat(self, body: dict[str, Any]) -> tuple[int, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, _error("invalid_request_error", "messages must be a non-empty list", False)
        message: dict[str, Any]
        if self.script is not None:
            offered = [t["function"] for t in body.get("tools") or []]
            tools = offered if self.full_tools else [t["name"] for t in offered]
            turn = self.script(_neutral_openai(messages), tools)
            text = turn.text
            message = {"role": "assistant", "content": text or None}
            if turn.tool_calls:
                message["tool_calls"] = [
                    {"id": f"call_{i}", "type": "function",
                     "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                    for i, (name, args) in enumerate(turn.tool_calls)
                ]  # fmt: skip
            finish = "tool_calls" if turn.tool_calls else "stop"
        else:
            text = self._reply_text(
                messages, body.get("response_format"), self.models.get(body.get("model", ""))
            )
            message, finish = {"role": "assistant", "content": text}, "stop"
        document: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model") or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if self.usage:
            prompt, completion = _prompt_tokens(messages), estimate_tokens(text)
            document["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return 200, document

    def _embeddings(self, body: dict[str, Any]) -> tuple[int, Any]:
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return 400, _error("invalid_request_error", "input must be a string or a list of strings", False)
        data = [
            {"object": "embedding", "index": i, "embedding": vector_for(t, self.embedding_dim).tolist()}
            for i, t in enumerate(texts)
        ]
        document: dict[str, Any] = {
            "object": "list",
            "data": data[::-1],
            "model": body.get("model") or self.model,
        }
        if self.usage:
            tokens = sum(estimate_tokens(t) for t in texts)
            document["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, document

    def _messages(self, body: dict[str, Any]) -> tuple[int, Any]:
        messages = body.get("messages")
        if not isinstance(body.get("max_tokens"), int):
            return 400, _error("invalid_request_error", "max_tokens: Field required", True)
        if not isinstance(messages, list) or not messages:
            return 400, _error("invalid_request_error", "messages: at least one message is required", True)
        if any(m.get("role") not in ("user", "assistant") for m in messages if isinstance(m, dict)):
            return 400, _error("invalid_request_error", "messages: roles must be user or assistant", True)
        system = body.get("system")
        turns = ([{"role": "system", "content": system}] if isinstance(system, str) else []) + messages
        if self.script is not None:
            offered = [{"name": t["name"], "description": t.get("description", ""), "parameters": t.get("input_schema")}
                       for t in body.get("tools") or []]  # fmt: skip
            turn = self.script(
                _neutral_anthropic(turns), offered if self.full_tools else [t["name"] for t in offered]
            )
            text = turn.text
            content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            content += [
                {"type": "tool_use", "id": f"toolu_{i}", "name": name,
                 "input": args if isinstance(args, dict) else {"_malformed": args}}
                for i, (name, args) in enumerate(turn.tool_calls)
            ]  # fmt: skip
            stop = "tool_use" if turn.tool_calls else "end_turn"
        else:
            text = self.reply(turns)
            content, stop = [{"type": "text", "text": text}], "end_turn"
        document: dict[str, Any] = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or self.model,
            "content": content,
            "stop_reason": stop,
        }
        if self.usage:
            document["usage"] = {
                "input_tokens": _prompt_tokens(turns),
                "output_tokens": estimate_tokens(text),
            }
        return 200, document

    def _reply_text(self, messages: list[Any], response_format: Any, reply: ReplyFn | None = None) -> str:
        turns = [{"role": m.get("role", ""), "content": _text(m.get("content"))} for m in messages]
        if not isinstance(response_format, dict) or response_format.get("type") not in (
            "json_object",
            "json_schema",
        ):
            return (reply or self.reply)(turns)
        schema = response_format.get("schema") or response_format.get("json_schema", {}).get("schema")
        if not isinstance(schema, dict):
            return json.dumps({"answer": self.reply(turns)})
        return json.dumps(example_for_schema(schema, "\n".join(t["content"] for t in turns)))


def _neutral_openai(messages: list[Any]) -> list[dict[str, Any]]:
    neutral = []
    for m in messages:
        turn: dict[str, Any] = {"role": m.get("role"), "content": _text(m.get("content"))}
        if m.get("tool_calls"):
            turn["tool_calls"] = [
                (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]
            ]
        if m.get("tool_call_id"):
            turn["tool_call_id"] = m["tool_call_id"]
        neutral.append(turn)
    return neutral


def _neutral_anthropic(messages: list[Any]) -> list[dict[str, Any]]:
    neutral: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content")
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            neutral += [{"role": "tool", "tool_call_id": b["tool_use_id"], "content": _text(b["content"])}
                        for b in results]  # fmt: skip
            continue
        turn: dict[str, Any] = {"role": m.get("role"), "content": _text(content)}
        uses = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        if uses:
            turn["tool_calls"] = [(b["id"], b["name"], json.dumps(b["input"])) for b in uses]
        neutral.append(turn)
    return neutral


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _prompt_tokens(messages: Sequence[Any]) -> int:
    return sum(
        estimate_tokens(_text(m.get("content"))) + TEMPLATE_TOKENS_PER_MESSAGE
        for m in messages
        if isinstance(m, dict)
    )


def _error(kind: str, message: str, anthropic: bool) -> dict[str, Any]:
    """An error body in the endpoint's own format."""
    if anthropic:
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": None}}
