"""coco-sql as SQL procedures: `CALL coco_evolve('lockpicking6', 30, {'seed': 1})` from any DuckDB client.

`handlers` holds the procedures themselves, engine-neutral and thin over `coco_sql.api`: each takes a store and
plain arguments and returns rows. `duckdb` installs them in a DuckDB connection (`coco_sql.connect(path)`).
The Snowflake stored procedures are the same handlers behind Snowpark (a later step).
"""

from coco_sql.procedures.duckdb import connect, install

__all__ = ["connect", "install"]
