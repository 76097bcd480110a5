-- lockpicking6 seed: all six candidate sets are known, but only one interference rule.
WITH digits AS (
  SELECT
    id,
    CAST(SUBSTRING(code, 1, 1) AS INTEGER) AS p1,
    CAST(SUBSTRING(code, 2, 1) AS INTEGER) AS p2,
    CAST(SUBSTRING(code, 3, 1) AS INTEGER) AS p3,
    CAST(SUBSTRING(code, 4, 1) AS INTEGER) AS p4,
    CAST(SUBSTRING(code, 5, 1) AS INTEGER) AS p5,
    CAST(SUBSTRING(code, 6, 1) AS INTEGER) AS p6
  FROM input
)
SELECT
  id,
  (CASE WHEN p1 NOT IN (1, 4, 7) THEN 0 ELSE 1 END)
  + (CASE WHEN p2 NOT IN (2, 6, 8) THEN 0 WHEN p1 = 4 THEN 0 ELSE 1 END)
  + (CASE WHEN p3 NOT IN (0, 3, 9) THEN 0 ELSE 1 END)
  + (CASE WHEN p4 NOT IN (1, 4, 7) THEN 0 ELSE 1 END)
  + (CASE WHEN p5 NOT IN (0, 5, 8) THEN 0 ELSE 1 END)
  + (CASE WHEN p6 NOT IN (2, 5, 9) THEN 0 WHEN p1 = 4 THEN 0 ELSE 1 END) AS label
FROM digits
