"""Cortex's AI functions emulated in DuckDB (AI_CLASSIFY, AI_FILTER, AI_COMPLETE, ...): their semantics
(`functions`, `judging`, `semantic`, `tokens`), what the stand-ins bill (`billing`), the model requests
(`requests`), their binding as DuckDB UDFs (`udfs`), the engine part the loop and the sandboxes use (`local`:
`EnginePlugin.local_ai`) and the AI functions of a `coco_sql.connect` connection (`connection`). Their SQL
contract (names, signatures, limits, argument checks) is `sqlkit.ai_catalogue` and `sqlkit.ai_arguments`. Model
calls go through `coco_sql.llm`.

Importing this package connects to nothing and loads no model.
"""
