"""The SQL behind the read models (`coco_sql.report.read_models`), as named, parameterised DuckDB queries.

`Warehouse.report(name, params)` runs ``QUERIES[name]`` with DuckDB named parameters (``$run_id``, ...). Unlike the
history tools' queries (`history_sql`), these serve the user (CLI, HTML report, procedures), so they may read
test scores: nothing here is ever handed to the search. `run_spend` also serves the loop's spend limit
(`engine.spend`): token counts only, never a row.
"""

from __future__ import annotations

QUERIES: dict[str, str] = {
    "run_overview": """
SELECT r.run_id, r.task, r.seed, r.budget, r.status,
       (SELECT MAX(iteration) FROM programs p WHERE p.run_id = r.run_id) AS iterations,
       (SELECT MAX(val_score) FROM leaderboard l WHERE l.run_id = r.run_id) AS best_val
FROM runs r ORDER BY r.run_id
""",
    "leaderboard": """
SELECT program_id, iteration, parent_id, island, cell, approach, val_score, train_score, test_score, val_rank
FROM leaderboard WHERE run_id = $run_id
ORDER BY val_score DESC NULLS LAST, iteration
LIMIT $n
""",
    "lineage": """
SELECT l.depth, p.program_id, p.iteration, p.approach, p.strategy, s.score AS val_score
FROM lineage l
JOIN programs p ON p.program_id = l.ancestor_id
LEFT JOIN program_scores s ON s.program_id = p.program_id AND s.split = 'val'
WHERE l.program_id = $program_id
ORDER BY l.depth
""",
    "row_solvers": """
SELECT program_id, iteration, parent_id, score
FROM row_solvers
WHERE run_id = $run_id AND split = $split AND instance_id = $instance_id
ORDER BY score DESC, iteration
""",
    "cost_phases": """
SELECT CASE WHEN split = 'test' THEN 'report' WHEN split = 'mutator' THEN 'mutator' ELSE 'search' END AS phase,
       SUM(calls) AS calls, SUM(calls - cache_hits) AS provider_calls, SUM(cache_hits) AS cache_hits,
       SUM(errors) AS errors, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
       SUM(input_tokens + cached_input_tokens) AS input_tokens_without_cache,
       SUM(output_tokens + cached_output_tokens) AS output_tokens_without_cache,
       SUM(latency_ms) AS provider_latency_ms
FROM ai_usage WHERE run_id = $run_id
GROUP BY phase ORDER BY phase DESC
""",
    "cost_agents": """
SELECT function AS agent, model,
       SUM(calls) AS calls, SUM(calls - cache_hits) AS provider_calls, SUM(cache_hits) AS cache_hits,
       SUM(errors) AS errors, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
       SUM(latency_ms) AS provider_latency_ms
FROM ai_usage WHERE run_id = $run_id AND split = 'mutator'
GROUP BY function, model ORDER BY function, model
""",
    "run_spend": """
SELECT model, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens
FROM ai_usage WHERE run_id = $run_id
GROUP BY model ORDER BY model
""",
    # Every fully validated valid program's validation score and deploy cost per 1,000 rows (the view
    # `deploy_costs`): the candidates of the score/cost frontier. A child a minibatch stopped on its sample has
    # fewer validation rows than the split and is left out, as it is from admission.
    "deploy_costs": """
SELECT d.program_id, p.iteration, s.score AS val_score, d.n_rows,
       d.calls_per_1000, d.input_tokens_per_1000, d.output_tokens_per_1000
FROM deploy_costs d
JOIN programs p ON p.program_id = d.program_id
JOIN program_scores s ON s.program_id = d.program_id AND s.split = 'val'
WHERE d.run_id = $run_id AND p.valid
  AND d.n_rows = (SELECT MAX(n_rows) FROM program_scores WHERE run_id = $run_id AND split = 'val')
ORDER BY p.iteration
""",
    # The same programs' validation tokens per model (cached ones included), to price them per model.
    "deploy_cost_models": """
SELECT program_id, model, SUM(calls) AS calls, SUM(input_tokens + cached_input_tokens) AS input_tokens,
       SUM(output_tokens + cached_output_tokens) AS output_tokens
FROM ai_usage WHERE run_id = $run_id AND split = 'val'
GROUP BY program_id, model ORDER BY program_id, model
""",
    # What the AI functions and the mutator's models spent, per split (train, val, test, drafts, mutator).
    "cost_splits": """
SELECT split, SUM(calls) AS calls, SUM(calls - cache_hits) AS provider_calls, SUM(cache_hits) AS cache_hits,
       SUM(errors) AS errors, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
       SUM(input_tokens + cached_input_tokens) AS input_tokens_without_cache,
       SUM(output_tokens + cached_output_tokens) AS output_tokens_without_cache
FROM ai_usage WHERE run_id = $run_id
GROUP BY split ORDER BY split
""",
    # The same per iteration: how the spending grew over the run.
    "cost_iterations": """
SELECT iteration, SUM(calls - cache_hits) AS provider_calls, SUM(cache_hits) AS cache_hits,
       SUM(input_tokens + output_tokens) AS tokens
FROM ai_usage WHERE run_id = $run_id
GROUP BY iteration ORDER BY iteration
""",
    # The run's likely label errors (issue 38), with what a program (the champion) answered on each.
    "label_errors": """
SELECT l.instance_id, l.text, l.label, l.neighbours_label, l.neighbour_share, l.programs, e.output AS answer
FROM label_errors AS l
LEFT JOIN evaluations AS e
  ON e.run_id = l.run_id AND e.program_id = $program_id AND e.split = 'train' AND e.instance_id = l.instance_id
WHERE l.run_id = $run_id
ORDER BY l.instance_id
""",
    # One program's rows on one split, with what it answered and what was expected (JSON text).
    "split_rows": """
SELECT instance_id, score, output, expected, error
FROM evaluations WHERE run_id = $run_id AND program_id = $program_id AND split = $split
ORDER BY instance_id
""",
}
