"""DuckDB: the local store and the sandboxes' engine. `store` (DuckDBStore) and `writes` (an iteration's batch),
`procedures` (the procedures installed in a connection: `coco_sql.connect`) and `ai_functions` (the AI functions
of such a connection)."""

from coco_sql.engines import EnginePlugin, Part, SqlRules

PLUGIN = EnginePlugin(
    name="duckdb",
    sql=SqlRules(dialect="duckdb"),
    store=Part("coco_sql.engines.duckdb.store:DuckDBStore"),
)
