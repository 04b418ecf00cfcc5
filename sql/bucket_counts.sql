-- Rows and files per bucket of a written bucketed output (row counts come from parquet footers).
SELECT
    bucket,
    count(*)                 AS rows,
    count(DISTINCT filename) AS files
FROM read_parquet($files, filename = true, hive_partitioning = true)
GROUP BY bucket
ORDER BY bucket;
