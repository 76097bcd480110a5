"""Cortex AISQL functions for DuckDB (AI_CLASSIFY, AI_FILTER, AI_COMPLETE, ...): their semantics (`functions`,
`semantic`), their catalogue, and their binding as DuckDB UDFs. Model calls go through `coco_sql.llm`.

Importing this package connects to nothing and loads no model.
"""
