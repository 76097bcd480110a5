"""coco-sql as SQL procedures: `CALL coco_evolve('lockpicking6', 30, {'seed': 1})` from any DuckDB client.

`handlers` holds the procedures themselves, engine-neutral and thin over `coco_sql.api`: each takes a store and
plain arguments and returns rows; `help` their help and `progress` the coco_progress board. Each engine installs
them its own way: `engines.duckdb.procedures` in a DuckDB connection (`coco_sql.connect(path)`), and
`engines.snowflake.procs` as Snowpark stored procedures.
"""
