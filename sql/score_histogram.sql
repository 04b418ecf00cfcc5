-- Rows per quarter-point of score, for the raw dump's histogram.
SELECT
    floor(score * 4) / 4 AS score_from,
    count(*)             AS rows
FROM read_parquet($files)
GROUP BY score_from
ORDER BY score_from NULLS FIRST;
