"""The local AI functions as a sandbox calls them: plain callables by UDF name, so the loop, the sandboxes and the
kinds pass them along without knowing the engine that answers them (the DuckDB engine's `engines/duckdb/ai/`,
found through `plugins.local_ai()`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import duckdb

AiTable = Mapping[str, Callable[..., list[Any]]]
"""UDF name -> the function answering one chunk of its calls: one list per UDF parameter in, one value per row
out (the names and arities are `sqlkit.ai_catalogue.bound_udfs()`)."""

UdfCall = Callable[[str, list[list[Any]]], list[Any]]
"""What a registered UDF calls with its chunk: (UDF name, argument columns) -> one value per row. Inside a sandbox
worker it forwards the chunk to the parent (`sandbox.ai_pipe.ask_parent`), which answers from its `AiTable`."""


@dataclass(frozen=True)
class LocalFunctions:
    """The AI functions a run answers in this process, as the evaluator hands them to a kind's runner and the
    runner to its sandboxes: the run's `runtime` (an `llm.runtime.AiRuntime`: models, cache, ledger; a kind
    reads it for its own model calls and embeddings) and the sandbox engine's functions over it (`table`)."""

    runtime: Any
    table: AiTable


class LocalAi(Protocol):
    """AI functions answered in this process (an engine's part, `engines.EnginePlugin.local_ai`): what the
    evaluator hands the runners and their sandboxes (`functions`) and what a sandbox worker registers in its DuckDB
    connection (`register`), each chunk sent back to those functions. `runtime` is an `llm.runtime.AiRuntime`
    (not named here: this module imports nothing of coco-sql)."""

    def functions(self, runtime: Any) -> LocalFunctions: ...

    def register(self, con: duckdb.DuckDBPyConnection, call: UdfCall) -> None: ...


__all__ = ["AiTable", "LocalAi", "LocalFunctions", "UdfCall"]
