"""Snowflake: the warehouse store (Snowpark), which runs candidates as its own queries and UDFs, on Cortex.

`store` (SnowparkStore), `sql` (its tables and typed results), `ddl` (the schema's Snowflake statements),
`translate` (coco-sql's DuckDB queries as Snowflake SQL), `batch` (an iteration as one INSERT ALL),
`candidates` (the warehouse as the engine of candidates, probes and Python UDFs), `local`, `local_writes` and
`counting` (Snowpark local testing's stand-ins and statement counter), `strict` (a stored procedure's limits,
emulated for local testing), and `procs/` (the stored procedures: handlers, deploy, local deploy, mirror)."""

from coco_sql.engines import AiBinding, EnginePlugin, Part, SqlRules

PLUGIN = EnginePlugin(
    name="snowflake",
    sql=SqlRules(dialect="snowflake", translated=True, materialized_ctes=False, dbt_adapter="snowflake"),
    ai=AiBinding(
        cortex_names_only=True, embed_model="snowflake-arctic-embed-m-v1.5"
    ),  # llm.routing.CORTEX_EMBEDDING_MODEL
    store=Part("coco_sql.engines.snowflake.store:SnowparkStore"),
    runs_candidates=True,
    ddl=Part("coco_sql.engines.snowflake.ddl:snowflake_statements"),
    checks=Part("coco_sql.engines.snowflake.checks:CHECKS"),
    deploy_check=Part("coco_sql.engines.snowflake.deploy_check:check_program"),
    optimizer=Part("coco_sql.engines.snowflake.aifo"),
    commands=Part("coco_sql.engines.snowflake.procs.commands:COMMANDS"),
)
