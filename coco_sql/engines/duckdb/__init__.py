"""DuckDB: the local store and the sandboxes' engine."""

from coco_sql.engines import EnginePlugin

PLUGIN = EnginePlugin(name="duckdb", dialect="duckdb", warehouse=False)
