-- Views that answer a user's first questions. Same dialect and transpilation rule as schema.sql.

-- Every program of every run with its validation score and, once reported, its test score.
CREATE OR REPLACE VIEW leaderboard AS
SELECT
    p.run_id,
    p.program_id,
    p.iteration,
    p.parent_id,
    p.island,
    p.cell,
    p.approach,
    v.score AS val_score,
    t.score AS train_score,
    x.score AS test_score,
    RANK() OVER (PARTITION BY p.run_id ORDER BY v.score DESC NULLS LAST) AS val_rank
FROM programs AS p
LEFT JOIN program_scores AS v ON v.program_id = p.program_id AND v.split = 'val'
LEFT JOIN program_scores AS t ON t.program_id = p.program_id AND t.split = 'train'
LEFT JOIN program_scores AS x ON x.program_id = p.program_id AND x.split = 'test';

-- Ancestry: one row per (program, ancestor), depth 1 is the parent. Filter on program_id.
CREATE OR REPLACE VIEW lineage AS
WITH RECURSIVE up (program_id, ancestor_id, depth) AS (
    SELECT program_id, parent_id, 1 FROM programs WHERE parent_id IS NOT NULL
    UNION ALL
    SELECT up.program_id, p.parent_id, up.depth + 1
    FROM up JOIN programs AS p ON p.program_id = up.ancestor_id
    WHERE p.parent_id IS NOT NULL
)
SELECT program_id, ancestor_id, depth FROM up;

-- Which programs solve a given row (row score >= 0.9, the paper's "solved" threshold, Appendix C.3).
CREATE OR REPLACE VIEW row_solvers AS
SELECT e.run_id, e.split, e.instance_id, e.program_id, p.iteration, p.parent_id, e.score
FROM evaluations AS e
JOIN programs AS p ON p.program_id = e.program_id
WHERE e.score >= 0.9;

-- The MAP-Elites archive now: the latest occupant of every (run, island, cell).
CREATE OR REPLACE VIEW archive AS
SELECT run_id, island, cell, program_id, iteration AS since_iteration, reason
FROM archive_entries
QUALIFY ROW_NUMBER() OVER (PARTITION BY run_id, island, cell ORDER BY iteration DESC, seq DESC) = 1;

-- The strategy ledger with PACE's primitive operator of each child (runs with primitives on; NULL otherwise):
-- the operator applied (P1-P4), its focus primitive, and whether the child kept the operator's contract.
CREATE OR REPLACE VIEW ledger_primitives AS
SELECT
    l.run_id,
    l.iteration,
    l.program_id,
    l.strategy,
    l.status,
    l.score_delta,
    t.operator,
    t.focus,
    t.verified,
    t.reason AS contract_violation,
    l.note
FROM ledger AS l
LEFT JOIN primitive_trials AS t ON t.run_id = l.run_id AND t.program_id = l.program_id;

-- What each program would cost deployed, per 1,000 rows (engine/deploy_cost.py): its AI calls and tokens on the
-- validation rows, cache hits included (a deployed pipeline pays for every row), over the rows it ran on; 0 for a
-- program without AI calls. calls_per_1000 = 1000 * sum(calls) / n_rows, and the same for input and output tokens.
CREATE OR REPLACE VIEW deploy_costs AS
WITH spent AS (
    SELECT
        program_id,
        SUM(calls) AS calls,
        SUM(input_tokens + cached_input_tokens) AS input_tokens,
        SUM(output_tokens + cached_output_tokens) AS output_tokens
    FROM ai_usage
    WHERE split = 'val'
    GROUP BY program_id
)
SELECT
    s.run_id,
    s.program_id,
    s.n_rows,
    CAST(COALESCE(u.calls, 0) AS DOUBLE) * 1000 / s.n_rows AS calls_per_1000,
    CAST(COALESCE(u.input_tokens, 0) AS DOUBLE) * 1000 / s.n_rows AS input_tokens_per_1000,
    CAST(COALESCE(u.output_tokens, 0) AS DOUBLE) * 1000 / s.n_rows AS output_tokens_per_1000
FROM program_scores AS s
LEFT JOIN spent AS u ON u.program_id = s.program_id
WHERE s.split = 'val' AND s.n_rows > 0;
