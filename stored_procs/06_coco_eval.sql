CREATE OR REPLACE PROCEDURE coco_eval(task VARCHAR, program VARCHAR, split VARCHAR DEFAULT 'val')
RETURNS TABLE (task VARCHAR, split VARCHAR, score FLOAT, "ROWS" NUMBER(38, 0), failing_rows NUMBER(38, 0), error VARCHAR)
LANGUAGE PYTHON
RUNTIME_VERSION = '3.11'
PACKAGES = ('snowflake-snowpark-python==1.56.0', 'numpy==2.4.6', 'pandas==2.3.3', 'scipy==1.17.1', 'pyarrow==26.0.1', 'duckdb==2.0.1', 'jinja2==3.1.6', 'pyyaml==6.0.4')
IMPORTS = ('@coco_sql_stage/coco_sql.zip')
HANDLER = 'coco_sql.engines.snowflake.procs.handlers.coco_eval'
EXECUTE AS CALLER;
