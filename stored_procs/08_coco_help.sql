CREATE OR REPLACE PROCEDURE coco_help(topic VARCHAR DEFAULT NULL)
RETURNS TABLE (name VARCHAR, type VARCHAR, range VARCHAR, default VARCHAR, example VARCHAR, doc VARCHAR)
LANGUAGE PYTHON
RUNTIME_VERSION = '3.11'
PACKAGES = ('snowflake-snowpark-python==1.56.0', 'numpy==2.4.6', 'pandas==2.3.3', 'scipy==1.17.1', 'pyarrow==26.0.1', 'duckdb==2.0.1', 'jinja2==3.1.6', 'pyyaml==6.0.4')
IMPORTS = ('@coco_sql_stage/coco_sql.zip')
HANDLER = 'coco_sql.engines.snowflake.procs.handlers.coco_help'
EXECUTE AS CALLER;
