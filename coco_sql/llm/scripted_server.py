"""A scripted model behind a real OpenAI-compatible HTTP server: `coco-sql demo-agent-server`.

The script is a function of the conversation and the tools offered, never a language model
(`languages.agent_spec.demo_model.DataAgentModel` is the one shipped). The server speaks the wire format coco-sql's
OpenAI-compatible client speaks to any provider: POST /v1/chat/completions (tool calls included; not streamed)
and GET /v1/models. So a run pointed at it (OPENAI_BASE_URL) goes through the real client, call pool, response
cache and tool loop: everything but the model is what a run against a real endpoint does. Every answer's model
name says it is scripted, and so does /v1/models.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from coco_sql.llm.providers.base import estimate_tokens


@dataclass(frozen=True)
class Turn:
    """What a script says: text, and tool calls as (name, arguments) pairs."""

    text: str = ""
    tool_calls: tuple[tuple[str, Mapping[str, Any] | str], ...] = ()


#: The conversation (role, content, and `tool_calls` [(id, name, arguments)] or `tool_call_id`) and the tools
#: offered ({name, description, parameters}) -> the next turn.
Script = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Turn]


def neutral_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages in the script's neutral shape."""
    neutral = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):  # content parts: their text
            content = "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
        turn: dict[str, Any] = {"role": m.get("role"), "content": content or ""}
        if m.get("tool_calls"):
            turn["tool_calls"] = [
                (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]
            ]
        if m.get("tool_call_id"):
            turn["tool_call_id"] = m["tool_call_id"]
        neutral.append(turn)
    return neutral


def completion(body: Mapping[str, Any], script: Script, model: str) -> tuple[int, dict[str, Any]]:
    """The status and JSON document of one POST /v1/chat/completions."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return 400, {
            "error": {"message": "messages must be a non-empty list", "type": "invalid_request_error"}
        }
    tools = [t["function"] for t in body.get("tools") or [] if isinstance(t, Mapping) and "function" in t]
    turn = script(neutral_messages(messages), tools)
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
            for i, (name, args) in enumerate(turn.tool_calls)
        ]  # fmt: skip
    prompt = sum(estimate_tokens(str(m.get("content") or "")) + 3 for m in messages)
    output = estimate_tokens(turn.text) + sum(estimate_tokens(json.dumps(a)) for _, a in turn.tool_calls)
    return 200, {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if turn.tool_calls else "stop"}
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output},
    }


class ScriptedServer:
    """`script` served on http://host:port/v1 until `close()` (or the `with` block) ends; port 0 picks one."""

    def __init__(self, script: Script, model: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.script, self.model = script, model
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, document: Mapping[str, Any]) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": outer.model, "object": "model",
                                                                  "owned_by": "coco-sql (scripted)"}]})  # fmt: skip
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(size) or b"{}")
                except ValueError:
                    self._send(
                        400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}}
                    )
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                self._send(*completion(body, outer.script, outer.model))

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def serve_forever(self) -> None:
        self._server.serve_forever(poll_interval=0.2)

    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self.serve_forever, name="scripted-server", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown() if self._thread else None
        self._server.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
