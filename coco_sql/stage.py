"""coco-sql's Snowflake stage: one name for the deploy (the package zip) and the exports (the files they ship)."""

STAGE = "coco_sql_stage"
EXPORTS = "exports"  # the stage's folder for exported files
