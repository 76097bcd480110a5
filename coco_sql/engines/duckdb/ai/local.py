"""The DuckDB engine's local AI functions as an engine part (`EnginePlugin.local_ai`): the table a parent answers
a sandbox's AI chunks from, and the UDFs a DuckDB connection (a sandbox worker's, a dbt worker's) registers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coco_sql.core.ai_table import LocalFunctions
from coco_sql.engines.duckdb.ai.udfs import register_udfs

if TYPE_CHECKING:
    import duckdb

    from coco_sql.core.ai_table import UdfCall
    from coco_sql.llm.runtime import AiRuntime


class DuckDBAi:
    """`core.ai_table.LocalAi` for DuckDB: Cortex's AI functions emulated over `coco_sql.llm`'s models."""

    def functions(self, runtime: AiRuntime) -> LocalFunctions:
        """Every bound UDF answered in this process by `runtime`'s models, cache and ledger. (The functions load
        here, not with the part: a sandbox worker only registers UDFs, and imports no more than that needs.)"""
        from coco_sql.engines.duckdb.ai.functions import AiFunctions
        from coco_sql.engines.duckdb.ai.udfs import implementations

        return LocalFunctions(runtime, implementations(AiFunctions(runtime)))

    def register(self, con: duckdb.DuckDBPyConnection, call: UdfCall) -> None:
        """Every bound AI UDF in `con`, each chunk handed to `call` (`udfs.register_udfs`)."""
        register_udfs(con, call)


LOCAL_AI = DuckDBAi()

__all__ = ["LOCAL_AI", "DuckDBAi"]
