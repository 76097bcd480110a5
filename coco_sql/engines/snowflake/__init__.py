"""Snowflake: the warehouse store (Snowpark), which runs candidates as its own queries and UDFs, on Cortex."""

from coco_sql.engines import EnginePlugin

PLUGIN = EnginePlugin(
    name="snowflake",
    dialect="snowflake",
    warehouse=True,
    translated=True,
    cortex_names_only=True,
    materialized_ctes=False,
    schema_fixups=True,
)
