CREATE OR REPLACE PROCEDURE coco_report(run_id NUMBER DEFAULT NULL)
RETURNS TABLE (run_id NUMBER(38, 0), html VARCHAR)
LANGUAGE PYTHON
RUNTIME_VERSION = '3.11'
PACKAGES = ('snowflake-snowpark-python==1.56.0', 'numpy==2.4.6', 'pandas==2.3.3', 'scipy==1.17.1', 'pyarrow==26.0.1', 'duckdb==2.0.1', 'jinja2==3.1.6', 'pyyaml==6.0.4')
IMPORTS = ('@coco_sql_stage/coco_sql.zip')
HANDLER = 'coco_sql.engines.snowflake.procs.handlers.coco_report'
EXECUTE AS CALLER;
