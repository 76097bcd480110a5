"""The SQL of the history query tools (CoCoEvolve Table 6), as named, parameterised DuckDB queries.

`Warehouse.history(name, params)` runs ``QUERIES[name]`` with DuckDB named parameters (``$run_id``, ...).
The Python API over them is `coco_sql.reflect.history.HistoryTools`; every contract is stated there.

Rules every query here keeps, because the results go to the search (the mutator):

- every query is filtered on ``run_id`` first;
- per-instance rows come from ``split = 'train'`` only;
- program-level scores are the ``'val'`` and ``'train'`` aggregates of ``program_scores``; nothing reads a
  ``'test'`` row of any table;
- a program's ``error`` column is the message its *validation* evaluation produced; it is returned only when a
  training row carries the same message (so it cannot quote a validation row), and replaced by a fixed category
  otherwise (`withheld_error`: "fails on validation: compile error (the message is withheld ...)").

Every query means the same in DuckDB and in Snowflake (`store.portable`: no structured comparison, no
function whose meaning differs; `tests/test_named_queries.py` checks both texts and compares every query's rows
with a pandas computation on both engines). A list comes back as comma-separated text (`LIST_COLUMNS`), decoded
by the store.

Speed (a store of 10,000 programs and 1,000,000 evaluation rows, see bench/bench_history.py): no query runs a
window over a whole table; windows run over one run's programs or one instance's rows after filtering.
"""

from __future__ import annotations

# What the search sees of an error its training rows do not share: a fixed category, never the message (which
# may quote a validation row). The first pattern (SQL LIKE, case-sensitive in both engines) that the stored
# message matches names it. The category is the program's to choose (its message is its own), so it tells
# the search at most two bits per program, no more than the program's validation score does already.
ERROR_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("rejected:%", "rejected by the validator"),
    ("%could not parse%", "compile error"),
    ("%Compilation Error%", "compile error"),
    ("%deadline%", "timeout"),
    ("%memory%", "out of memory"),
)
OTHER_ERROR = "runtime error"
WITHHELD = " (the message is withheld: validation rows are hidden from the search)"
WITHHELD_ERROR = f"fails on validation: {OTHER_ERROR}{WITHHELD}"


def withheld_error(message: str) -> str:
    """The fixed text the search sees for `message`, an error of validation rows (the SQL below says the same)."""
    category = next((c for pattern, c in ERROR_CATEGORIES if _like(message, pattern)), OTHER_ERROR)
    return f"fails on validation: {category}{WITHHELD}"


def _like(text: str, pattern: str) -> bool:
    core = pattern.strip("%")
    if pattern.startswith("%") and pattern.endswith("%"):
        return core in text
    return text.startswith(core) if pattern.endswith("%") else text.endswith(core)


def _withheld_sql(column: str) -> str:
    arms = " ".join(
        f"WHEN {column} LIKE '{pattern}' THEN 'fails on validation: {category}{WITHHELD}'"
        for pattern, category in ERROR_CATEGORIES
    )
    return f"CASE {arms} ELSE '{WITHHELD_ERROR}' END"


# One program's scores: joined by the queries below as `v` (validation) and `t` (training).
_SCORES = """
LEFT JOIN program_scores AS v ON v.run_id = $run_id AND v.program_id = p.program_id AND v.split = 'val'
LEFT JOIN program_scores AS t ON t.run_id = $run_id AND t.program_id = p.program_id AND t.split = 'train'
"""

#: query -> the columns that hold a comma-separated list of integers (`named.decode_lists`).
LIST_COLUMNS: dict[str, tuple[str, ...]] = {"diverse_programs": ("islands",)}

QUERIES: dict[str, str] = {
    # -- checks --------------------------------------------------------------------------------------------
    "has_program": """
SELECT program_id FROM programs WHERE run_id = $run_id AND program_id = $program_id
""",
    "has_train_instance": """
SELECT instance_id FROM evaluations
WHERE run_id = $run_id AND split = 'train' AND instance_id = $instance_id
LIMIT 1
""",
    "iterations": """
SELECT MIN(iteration) AS first, MAX(iteration) AS last FROM programs WHERE run_id = $run_id
""",
    # -- lineage -------------------------------------------------------------------------------------------
    "program": f"""
SELECT p.program_id, p.iteration, p.parent_id, p.donor_id, p.island, p.cell, p.approach, p.strategy, p.valid,
       CASE
           WHEN p.error IS NULL THEN NULL
           WHEN EXISTS (
               SELECT 1 FROM evaluations AS e
               WHERE e.run_id = $run_id AND e.program_id = p.program_id AND e.split = 'train'
                 AND e.error = p.error
           ) THEN p.error
           ELSE {_withheld_sql("p.error")}
       END AS error,
       v.score AS val_score, t.score AS train_score, p.code
FROM programs AS p
{_SCORES}
WHERE p.run_id = $run_id AND p.program_id = $program_id
""",
    "parent": f"""
SELECT p.program_id, p.iteration, v.score AS val_score, p.parent_id, pv.score AS parent_val_score,
       v.score - pv.score AS delta, p.donor_id, dv.score AS donor_val_score
FROM programs AS p
{_SCORES}
LEFT JOIN program_scores AS pv ON pv.run_id = $run_id AND pv.program_id = p.parent_id AND pv.split = 'val'
LEFT JOIN program_scores AS dv ON dv.run_id = $run_id AND dv.program_id = p.donor_id AND dv.split = 'val'
WHERE p.run_id = $run_id AND p.program_id = $program_id
""",
    "children": f"""
SELECT p.program_id, p.iteration, p.valid, v.score AS val_score, v.score - pv.score AS delta, p.approach,
       p.strategy
FROM programs AS p
{_SCORES}
LEFT JOIN program_scores AS pv ON pv.run_id = $run_id AND pv.program_id = $program_id AND pv.split = 'val'
WHERE p.run_id = $run_id AND p.parent_id = $program_id
ORDER BY p.iteration
""",
    "lineage": f"""
WITH RECURSIVE run_programs AS (
    SELECT program_id, parent_id FROM programs WHERE run_id = $run_id
), up (ancestor_id, depth) AS (
    SELECT parent_id, CAST(1 AS BIGINT) FROM run_programs WHERE program_id = $program_id AND parent_id IS NOT NULL
    UNION ALL
    SELECT r.parent_id, up.depth + 1
    FROM up JOIN run_programs AS r ON r.program_id = up.ancestor_id
    WHERE r.parent_id IS NOT NULL AND up.depth < $depth
)
SELECT up.depth, p.program_id, p.iteration, p.parent_id, v.score AS val_score, t.score AS train_score,
       p.approach, p.strategy
FROM up
JOIN programs AS p ON p.run_id = $run_id AND p.program_id = up.ancestor_id
{_SCORES}
ORDER BY up.depth
""",
    "best_programs": f"""
SELECT p.program_id, p.iteration, v.score AS val_score, t.score AS train_score, p.parent_id, p.island, p.cell,
       p.approach, p.strategy
FROM programs AS p
{_SCORES}
WHERE p.run_id = $run_id AND p.valid AND v.score IS NOT NULL
ORDER BY v.score DESC, p.iteration
LIMIT $n
""",
    "diverse_programs": f"""
WITH occupants AS (  -- the `archive` view for this run: the latest landing per (island, cell)
    SELECT island, cell, program_id
    FROM (
        SELECT island, cell, program_id,
               ROW_NUMBER() OVER (PARTITION BY island, cell ORDER BY iteration DESC, seq DESC) AS landing
        FROM archive_entries
        WHERE run_id = $run_id
    ) AS landings
    WHERE landing = 1
), ranked AS (  -- per cell: its occupants, the best first (val score, then the earliest)
    SELECT o.cell, o.island, o.program_id,
           ROW_NUMBER() OVER (
               PARTITION BY o.cell ORDER BY COALESCE(v.score, -1.0) DESC, p.iteration, o.island
           ) AS place
    FROM occupants AS o
    JOIN programs AS p ON p.run_id = $run_id AND p.program_id = o.program_id
    LEFT JOIN program_scores AS v ON v.run_id = $run_id AND v.program_id = o.program_id AND v.split = 'val'
), best AS (  -- an (island, cell) has one occupant, so a cell's islands are distinct
    SELECT cell, MIN(CASE WHEN place = 1 THEN program_id END) AS program_id,
           STRING_AGG(CAST(island AS VARCHAR), ',' ORDER BY island) AS islands
    FROM ranked
    GROUP BY cell
)
SELECT b.cell, p.program_id, p.iteration, v.score AS val_score, t.score AS train_score, p.approach, b.islands
FROM best AS b
JOIN programs AS p ON p.run_id = $run_id AND p.program_id = b.program_id
{_SCORES}
ORDER BY v.score DESC NULLS LAST, p.iteration, b.cell
""",
    "architecture_history": f"""
WITH landings AS (
    SELECT iteration, seq, island, cell, program_id, reason,
           LAG(program_id) OVER (PARTITION BY island, cell ORDER BY iteration, seq) AS replaced_id
    FROM archive_entries
    WHERE run_id = $run_id AND (CAST($cell AS VARCHAR) IS NULL OR cell = $cell)  -- one cell's whole history
)
SELECT l.iteration, l.seq, l.island, l.cell, l.program_id, l.reason, v.score AS val_score,
       l.replaced_id, rv.score AS replaced_val_score, p.approach
FROM landings AS l
JOIN programs AS p ON p.run_id = $run_id AND p.program_id = l.program_id
{_SCORES}
LEFT JOIN program_scores AS rv ON rv.run_id = $run_id AND rv.program_id = l.replaced_id AND rv.split = 'val'
ORDER BY l.iteration, l.seq
""",
    # -- trajectory ----------------------------------------------------------------------------------------
    "recent_scores": """
WITH scored AS (
    SELECT p.iteration, p.program_id, p.parent_id, p.valid, CASE WHEN p.valid THEN v.score END AS val_score
    FROM programs AS p
    LEFT JOIN program_scores AS v ON v.run_id = $run_id AND v.program_id = p.program_id AND v.split = 'val'
    WHERE p.run_id = $run_id
), cut AS (
    SELECT MAX(iteration) - $n AS before FROM programs WHERE run_id = $run_id
), earlier AS (  -- best val score before the window, so the running max runs over n rows only
    SELECT MAX(val_score) AS best FROM scored WHERE iteration <= (SELECT before FROM cut)
), recent AS (
    SELECT iteration, program_id, parent_id, valid, val_score,
           MAX(val_score) OVER (ORDER BY iteration ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running
    FROM scored
    WHERE iteration > (SELECT before FROM cut)
)
SELECT r.iteration, r.program_id, r.parent_id, r.valid, r.val_score,
       CASE WHEN e.best IS NULL OR r.running >= e.best THEN r.running ELSE e.best END AS best_so_far,
       l.status, l.score_delta
FROM recent AS r
CROSS JOIN earlier AS e
LEFT JOIN ledger AS l ON l.run_id = $run_id AND l.iteration = r.iteration
ORDER BY r.iteration
""",
    "thinking_trace": """
SELECT iteration, kind, program_id, payload
FROM events
WHERE run_id = $run_id AND iteration = $iteration
ORDER BY created_at, seq  -- the order they were written in: by batch, then within it
""",
    "thinking_turns": """
SELECT agent, turn, role, content, tool_calls, tool_call_id, tool_name, input_tokens, output_tokens, template, model
FROM agent_turns
WHERE run_id = $run_id AND iteration = $iteration
ORDER BY CASE agent WHEN 'reflector' THEN 0 WHEN 'proposer' THEN 1 ELSE 2 END, agent, turn  -- decision order
""",
    # -- per task: training rows only ----------------------------------------------------------------------
    "question_solvers": """
WITH row_scores AS MATERIALIZED (  -- one scan of the evaluations: this training row of every program
    SELECT program_id, score, output, error
    FROM evaluations
    WHERE run_id = $run_id AND split = 'train' AND instance_id = $instance_id
), top AS (
    SELECT s.program_id, p.iteration, s.score, s.output, s.error, p.parent_id, p.approach
    FROM row_scores AS s
    JOIN programs AS p ON p.run_id = $run_id AND p.program_id = s.program_id
    ORDER BY s.score DESC, p.iteration
    LIMIT $n
)
SELECT t.program_id, t.iteration, t.score, t.output, t.error, v.score AS val_score, t.parent_id,
       ps.score AS parent_score, t.approach
FROM top AS t
LEFT JOIN program_scores AS v ON v.run_id = $run_id AND v.program_id = t.program_id AND v.split = 'val'
LEFT JOIN row_scores AS ps ON ps.program_id = t.parent_id
ORDER BY t.score DESC, t.iteration
""",
    "row_trace": """
SELECT instance_id, score, output, error, observation
FROM evaluations
WHERE run_id = $run_id AND split = 'train' AND program_id = $program_id AND instance_id = $instance_id
""",
    "question_memory": """
WITH row_scores AS MATERIALIZED (  -- one scan of the evaluations: this training row of every program
    SELECT program_id, score, output
    FROM evaluations
    WHERE run_id = $run_id AND split = 'train' AND instance_id = $instance_id
), edges AS (  -- narrow columns first; the text columns are fetched for the regressions only
    SELECT program_id, parent_id, iteration FROM programs WHERE run_id = $run_id AND parent_id IS NOT NULL
), regressions AS (
    SELECT c.program_id AS child_id, g.iteration, g.parent_id, c.score AS child_score, ps.score AS parent_score,
           c.output AS child_output, ps.output AS parent_output
    FROM row_scores AS c
    JOIN edges AS g ON g.program_id = c.program_id
    JOIN row_scores AS ps ON ps.program_id = g.parent_id
    WHERE c.score < ps.score
    ORDER BY g.iteration DESC
    LIMIT $n  -- the latest n
)
SELECT r.child_id, r.iteration, r.parent_id, r.child_score, r.parent_score, r.child_score - r.parent_score AS delta,
       r.child_output, r.parent_output, p.approach, p.strategy
FROM regressions AS r
JOIN programs AS p ON p.run_id = $run_id AND p.program_id = r.child_id
ORDER BY r.iteration
""",
    "suggested_questions": """
WITH mine AS (
    SELECT instance_id, score, output, expected, error
    FROM evaluations
    WHERE run_id = $run_id AND split = 'train' AND program_id = $program_id
), population AS (
    SELECT e.instance_id, MAX(e.score) AS population_best, COUNT(*) FILTER (WHERE e.score >= 0.9) AS solvers
    FROM evaluations AS e
    WHERE e.run_id = $run_id AND e.split = 'train'
    GROUP BY e.instance_id
)
SELECT m.instance_id, m.score, m.output, m.expected, m.error, g.population_best, g.solvers
FROM mine AS m
LEFT JOIN population AS g USING (instance_id)
ORDER BY m.score, g.population_best DESC, m.instance_id
LIMIT $n
""",
    # -- primitives (PACE) ---------------------------------------------------------------------------------
    "primitives": """
SELECT p.name, p.language, p.signature, p.how, p.origin_program, p.created_iteration,
       CAST(1 + COUNT(t.program_id) FILTER (WHERE t.verified AND t.improved) AS DOUBLE)
           / (2 + COUNT(t.program_id) FILTER (WHERE t.verified)) AS posterior_mean,
       COUNT(t.program_id) FILTER (WHERE t.verified) AS trials,
       COUNT(t.program_id) FILTER (WHERE t.verified AND t.improved) AS improved,
       COUNT(t.program_id) FILTER (WHERE NOT t.verified) AS violations,
       p.code
FROM primitives AS p
LEFT JOIN primitive_trials AS t ON t.run_id = $run_id AND t.focus = p.name
WHERE p.run_id = $run_id
GROUP BY p.name, p.language, p.signature, p.how, p.origin_program, p.created_iteration, p.code
ORDER BY posterior_mean DESC, p.created_iteration, p.name
LIMIT $n
""",
    "primitive_helped": """
SELECT focus AS name, iteration, program_id, operator, parent_score, child_score
FROM primitive_trials
WHERE run_id = $run_id AND verified AND improved AND focus IS NOT NULL
ORDER BY iteration, program_id, operator, focus
""",
    "hard_questions": """
SELECT instance_id, MAX(score) AS population_best, AVG(score) AS mean_score,
       COUNT(*) FILTER (WHERE score >= 0.9) AS solvers, COUNT(*) AS programs
FROM evaluations
WHERE run_id = $run_id AND split = 'train'
GROUP BY instance_id
ORDER BY population_best, mean_score, instance_id
LIMIT $n
""",
}
