"""coco-sql inside Snowflake: the stored procedures' Snowpark handlers (`handlers`), the SQL that deploys them
(`deploy`), and pulling a run down into DuckDB (`mirror`)."""
