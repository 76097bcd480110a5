"""The store's typed reads (`store.reads`) as named, parameterised DuckDB queries, written once for both engines.

Like the history and report queries (`history_sql`, `report_sql`), each is DuckDB text with `$name` parameters;
the DuckDB store runs it as written, the Snowflake store runs sqlglot's translation (`store.portable`), so a read
cannot drift between the engines (it did: DuckDB's `program_scores` read left out `cache_hits`). Every query keeps
to the constructs of `store.portable` (`tests/test_named_queries.py` checks them) and orders its rows fully, so
both engines return them in the same order.
"""

from __future__ import annotations

PROGRAM_COLUMNS = (
    "program_id, run_id, iteration, parent_id, donor_id, code, language, dialect, island, cell, approach, "
    "strategy, valid, error"
)
RUN_COLUMNS = "run_id, task, task_fingerprint, seed, budget, config, status, created_at, finished_at"

QUERIES: dict[str, str] = {
    # -- runs ----------------------------------------------------------------------------------------------
    "run": f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $run_id",
    "latest_run": "SELECT MAX(run_id) AS run_id FROM runs",
    "latest_run_of_task": "SELECT MAX(run_id) AS run_id FROM runs WHERE task = $task",
    "runs_of_task": "SELECT run_id FROM runs WHERE task = $task ORDER BY run_id",
    "last_iteration": "SELECT MAX(iteration) AS iteration FROM programs WHERE run_id = $run_id",
    # -- a run's rows, in the order the loop rebuilds its state from them ------------------------------------
    "programs": f"SELECT {PROGRAM_COLUMNS} FROM programs WHERE run_id = $run_id ORDER BY iteration, program_id",
    "program": f"SELECT {PROGRAM_COLUMNS} FROM programs WHERE program_id = $program_id",
    "program_scores": """
SELECT program_id, split, score, n_rows, n_errors, model_calls, input_tokens, output_tokens, latency_ms, cache_hits
FROM program_scores WHERE run_id = $run_id AND split = $split ORDER BY program_id
""",
    "row_scores": """
SELECT program_id, instance_id, score FROM evaluations WHERE run_id = $run_id AND split = $split
""",
    "program_row_scores": """
SELECT program_id, instance_id, score FROM evaluations
WHERE run_id = $run_id AND split = $split AND program_id = $program_id
""",
    "archive_entries": """
SELECT iteration, seq, island, cell, program_id, reason FROM archive_entries WHERE run_id = $run_id
ORDER BY iteration, seq
""",
    "ledger": """
SELECT iteration, program_id, strategy, kind, status, parent_score, child_score, score_delta, paradigm, note
FROM ledger WHERE run_id = $run_id ORDER BY iteration, program_id
""",
    "events": """
SELECT iteration, kind, program_id, payload FROM events WHERE run_id = $run_id AND kind = $kind
ORDER BY iteration, program_id
""",
    "primitives": """
SELECT name, language, code, signature, origin_program, created_iteration, how FROM primitives
WHERE run_id = $run_id ORDER BY created_iteration, name
""",
    "primitive_trials": """
SELECT iteration, program_id, operator, focus, parent_score, child_score, improved, verified, reason
FROM primitive_trials WHERE run_id = $run_id ORDER BY iteration, program_id, operator
""",
    # what each program's validation evaluation used: its rows, and per model its calls and tokens (cached
    # ones too: deployed, a warehouse has no cache of coco-sql's); a program without AI calls has one row
    "deploy_usage": """
SELECT s.program_id, s.n_rows, u.model, u.calls, u.input_tokens, u.output_tokens
FROM program_scores AS s
LEFT JOIN (
    SELECT program_id, model, SUM(calls) AS calls, SUM(input_tokens + cached_input_tokens) AS input_tokens,
           SUM(output_tokens + cached_output_tokens) AS output_tokens
    FROM ai_usage WHERE run_id = $run_id AND split = 'val' GROUP BY program_id, model
) AS u ON u.program_id = s.program_id
WHERE s.run_id = $run_id AND s.split = 'val'
ORDER BY s.program_id, u.model
""",
    # -- shared by every run of the store ------------------------------------------------------------------
    "ai_cache": """
SELECT cache_key, function, model, response, input_tokens, output_tokens, latency_ms FROM ai_cache
ORDER BY cache_key
""",
    "ai_embeddings": "SELECT model, text_hash, vector, input_tokens FROM ai_embeddings ORDER BY model, text_hash",
    # -- registered tasks ----------------------------------------------------------------------------------
    "task": "SELECT source, options, column_types, n_rows FROM tasks WHERE name = $name",
    "task_rows": "SELECT row_data FROM task_rows WHERE task = $name ORDER BY position",
}
