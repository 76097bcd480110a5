CREATE OR REPLACE PROCEDURE coco_task(name VARCHAR, source VARCHAR, options VARIANT DEFAULT NULL)
RETURNS TABLE (task VARCHAR, "ROWS" NUMBER(38, 0), train NUMBER(38, 0), val NUMBER(38, 0), test NUMBER(38, 0))
LANGUAGE PYTHON
RUNTIME_VERSION = '3.11'
PACKAGES = ('snowflake-snowpark-python==1.56.0', 'numpy==2.4.6', 'pandas==2.3.3', 'scipy==1.17.1', 'pyarrow==26.0.1', 'duckdb==2.0.1', 'jinja2==3.1.6', 'pyyaml==6.0.4')
IMPORTS = ('@coco_sql_stage/coco_sql.zip')
HANDLER = 'coco_sql.engines.snowflake.procs.handlers.coco_task'
EXECUTE AS CALLER;
