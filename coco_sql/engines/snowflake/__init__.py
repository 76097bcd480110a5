"""Snowflake: the warehouse store (Snowpark), which runs candidates as its own queries and UDFs, on Cortex.

`store` (SnowparkStore), `sql` (its tables and typed results), `batch` (an iteration as one INSERT ALL),
`candidates` (the warehouse as the engine of candidates, probes and Python UDFs), `local`, `local_writes` and
`counting` (Snowpark local testing's stand-ins and statement counter), `strict` (a stored procedure's limits,
emulated for local testing), and `procs/` (the stored procedures: handlers, deploy, local deploy, mirror)."""

from coco_sql.engines import EnginePlugin

PLUGIN = EnginePlugin(
    name="snowflake",
    dialect="snowflake",
    warehouse=True,
    translated=True,
    cortex_names_only=True,
    materialized_ctes=False,
    schema_fixups=True,
    store="coco_sql.engines.snowflake.store:SnowparkStore",
)
