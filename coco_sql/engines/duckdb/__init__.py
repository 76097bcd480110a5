"""DuckDB: the local store and the sandboxes' engine. `store` (DuckDBStore) and `writes` (an iteration's batch),
`procedures` (the procedures installed in a connection: `coco_sql.connect`) and `ai_functions` (the AI functions
of such a connection)."""

from coco_sql.engines import EnginePlugin

PLUGIN = EnginePlugin(
    name="duckdb", dialect="duckdb", warehouse=False, store="coco_sql.engines.duckdb.store:DuckDBStore"
)
