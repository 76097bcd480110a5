"""AI calls from inside a sandbox worker, answered by the parent's AI runtime over the worker's own pipe.

A worker holds no model, no cache and no key: its AI UDFs are proxies (`ask_parent`) that send one chunk of
arguments to the parent (`ai`) and wait for its values (`ai_result`) or its one-line error (`ai_error`). The
parent answers while it waits for the worker's result (`receive_answer`), with the functions of its AI runtime
(`AiServer`: providers, cache, cost ledger, deadline). Shared by the DuckDB sandbox and the dbt sandbox; the
messages are `messages.AI_CHUNK`, `AI_RESULT` and `AI_ERROR` in both protocols.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coco_sql.messages import pack_column
from coco_sql.wire import Channel, WireError

if TYPE_CHECKING:
    from coco_sql.child import ChildProcess
    from coco_sql.core.ai_table import AiTable, LocalFunctions, UdfCall


def ask_parent(channel: Channel) -> UdfCall:
    """The worker's side: a `UdfCall` (`core.ai_table`) that asks the parent for one chunk's values; its
    error becomes the UDF's exception."""

    def ask(udf: str, columns: list[list[Any]]) -> list[Any]:
        channel.send({"type": "ai", "udf": udf, "columns": [pack_column(column) for column in columns]})
        answer = channel.receive()
        if answer is None or answer["type"] not in ("ai_result", "ai_error"):
            raise RuntimeError("the parent must answer an AI chunk")
        if answer["type"] == "ai_error":
            raise RuntimeError(answer["message"])
        return answer["values"]

    return ask


class AiServer:
    """The parent's side: answers a worker's AI chunks with `ai`'s functions by UDF name
    (`plugin_loader.local_functions`; None: no AI runtime, every chunk fails with one line)."""

    def __init__(self, ai: LocalFunctions | None) -> None:
        self._functions: AiTable | None = None if ai is None else ai.table

    def answer(self, udf: str, columns: list[list[Any]]) -> dict[str, Any]:
        """Answer one chunk of AI calls in this process; a failure goes back as the UDF's error. WireError for
        a function the sandbox does not have (the worker only knows the real ones)."""
        if self._functions is None:
            return {"type": "ai_error", "message": f"{udf[:100]}: no AI runtime in this sandbox"}
        if udf not in self._functions:
            raise WireError(f"the sandbox process asked for the unknown AI function {udf[:100]!r}")
        try:
            return {"type": "ai_result", "values": self._functions[udf](*columns)}
        except Exception as error:  # the worker's UDF raises it; the evaluator reads run-level errors itself
            return {"type": "ai_error", "message": f"{udf}: {' '.join(str(error).split())[:300]}"}


def receive_answer(worker: ChildProcess, until: float, server: AiServer) -> dict[str, Any] | None:
    """The worker's next message that is not an AI chunk, answering every AI chunk that comes first; None when
    `until` (time.monotonic) passes. ChildDied, ChildMisbehaved and WireError as `ChildProcess.receive` and
    `AiServer.answer` raise them."""
    while True:
        message = worker.receive(until=until)
        if message is None or message["type"] != "ai":
            return message
        worker.send(server.answer(message["udf"], message["columns"]))
