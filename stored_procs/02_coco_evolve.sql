CREATE OR REPLACE PROCEDURE coco_evolve(task VARCHAR, budget NUMBER DEFAULT 60, options VARIANT DEFAULT NULL)
RETURNS TABLE (run_id NUMBER(38, 0), task VARCHAR, iterations NUMBER(38, 0), champion_id VARCHAR, seed_val_score FLOAT, champion_val_score FLOAT, seed_test_score FLOAT, champion_test_score FLOAT, best_id VARCHAR, best_val_score FLOAT, stopped VARCHAR, warnings VARCHAR)
LANGUAGE PYTHON
RUNTIME_VERSION = '3.11'
PACKAGES = ('snowflake-snowpark-python==1.56.0', 'numpy==2.4.6', 'pandas==2.3.3', 'scipy==1.17.1', 'pyarrow==26.0.1', 'duckdb==2.0.1', 'jinja2==3.1.6', 'pyyaml==6.0.4')
IMPORTS = ('@coco_sql_stage/coco_sql.zip')
HANDLER = 'coco_sql.engines.snowflake.procs.handlers.coco_evolve'
EXECUTE AS CALLER;
