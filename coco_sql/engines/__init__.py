"""Engines as plug-ins: where candidates run and the store lives (DuckDB locally, Snowflake through Snowpark).

An engine is an `EnginePlugin`, found by name through `coco_sql.plugins` (built-ins, and entry points of group
`coco_sql.engines`). It names its dialect, what differs in it as small tables (sqlglot's way: a dialect
overrides tables, not code paths), and its store class as a "module:attr" string, imported only when a store is
opened (`plugins.open_store`). Each built-in engine is one package: `duckdb/` (the store and its writes, the
procedures installed in a DuckDB connection and their AI functions) and `snowflake/` (the Snowpark store, its SQL,
batch writes, the warehouse as the candidates' engine, local testing's emulation, and `procs/`: the Snowpark
handlers, the deploy script and zip, the local-testing deploy and the mirror into DuckDB). What both stores do
the same way stays in `store/`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EnginePlugin:
    """One engine: `name` (task.toml `dialect`) and the SQL dialect its programs and queries are written in."""

    name: str
    dialect: str
    warehouse: bool  # runs candidates and AI functions itself (Snowflake), not in coco-sql's sandboxes
    # what differs in its SQL, as small tables (sqlglot's way: a dialect overrides tables, not code paths)
    translated: bool = False  # its programs are transpiled to DuckDB to run in the sandbox (FLATTEN, names)
    cortex_names_only: bool = False  # its AI functions take only Cortex's argument names (no local-only ones)
    materialized_ctes: bool = True  # its parser takes `WITH x AS MATERIALIZED (...)`
    schema_fixups: bool = False  # the schema's DDL needs the checked fixups of `store.schema`
    store: str = (
        ""  # "module:attr" of its `store.Warehouse` class, imported on first use (`plugins.open_store`)
    )


__all__ = ["EnginePlugin"]
