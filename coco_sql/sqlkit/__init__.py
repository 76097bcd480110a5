"""A neutral SQL toolkit that every kind holding SQL uses (issue 41).

What lives here is about SQL as text and as a sqlglot tree, not about a SQL *program* as a candidate: parsing
with bounds, the read-only check, the function allow-list and arities, macros, and the one-line rejection. It
imports nothing of `coco_sql.languages` or `coco_sql.engines`; the SQL, dbt and agent-spec kinds build on it.
"""
