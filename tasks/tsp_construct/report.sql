-- Mean tour length per problem size on the test split, for the seed and the champion of every finished run.
-- The output of a tsp_construct evaluation is the tour length; an instance without output (an invalid tour)
-- counts in `missing` and is left out of the mean. The champion is the program the run's `run_finished` event
-- names: the one the loop scored on the test split.
-- Run it on a store:  duckdb runs/tsp.duckdb < tasks/tsp_construct/report.sql
WITH reported AS (
    SELECT run_id, run_id || '-0' AS program_id, 'seed' AS role FROM events WHERE kind = 'run_finished'
    UNION ALL
    SELECT run_id, program_id, 'champion' AS role FROM events WHERE kind = 'run_finished'
)
SELECT
    r.run_id,
    CAST(split_part(e.instance_id, '_', 1)[2:] AS INTEGER) AS n,
    r.role,
    r.program_id,
    round(avg(CAST(e.output AS DOUBLE)), 3) AS mean_tour_length,
    count(e.output) AS instances,
    count(*) - count(e.output) AS missing
FROM reported AS r
JOIN evaluations AS e ON e.run_id = r.run_id AND e.program_id = r.program_id AND e.split = 'test'
GROUP BY ALL
ORDER BY r.run_id, n, r.role DESC;
