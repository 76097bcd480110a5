"""DuckDB: the local store and the sandboxes' engine. `store` (DuckDBStore) and `writes` (an iteration's batch),
`procedures` (the procedures installed in a connection: `coco_sql.connect`) and `ai/` (the AI functions: every
sandbox's, through `local_ai`, and a connection's)."""

from coco_sql.engines import EnginePlugin, Part, SqlRules

PLUGIN = EnginePlugin(
    name="duckdb",
    sql=SqlRules(dialect="duckdb", dbt_adapter="duckdb"),
    store=Part("coco_sql.engines.duckdb.store:DuckDBStore"),
    local_ai=Part("coco_sql.engines.duckdb.ai.local:LOCAL_AI"),
    procedures=Part("coco_sql.engines.duckdb.procedures:connect"),
)
