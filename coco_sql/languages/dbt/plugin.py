"""The dbt-duckdb plugin that gives a run's database its source tables, the AI UDFs and the lock-down.

Named in the profile the runner writes (``plugins: [{module: coco_sql.languages.dbt.plugin, config: {run:
TOKEN}}]``); dbt-duckdb imports this module, builds `Plugin` with that config and calls `configure_connection`
on the connection it has just opened, and `configure_cursor` on each cursor it opens on it (what a run's
deadline must interrupt). Everything it does is in `inputs.RunInputs`. Importing this module needs
dbt-duckdb; nothing else in the package imports it.
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin
from duckdb import DuckDBPyConnection

from coco_sql.languages.dbt.inputs import claim


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        token = plugin_config.get("run")
        if not isinstance(token, str):
            raise ValueError("the coco_sql plugin needs config: {run: TOKEN} (written by runner.DbtSession)")
        self._token = token

    def configure_connection(self, conn: DuckDBPyConnection) -> None:
        claim(self._token).prepare(conn)

    def configure_cursor(self, cursor: DuckDBPyConnection) -> None:
        claim(self._token).track(cursor)
