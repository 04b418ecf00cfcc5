-- Rows in and rows kept per bucket (bucket NULL: scored below every bucket, dropped).
SELECT
    bucket,
    count(*)         AS rows_in,
    count_if(keep)   AS rows_kept
FROM read_parquet($selection)
GROUP BY bucket
ORDER BY bucket NULLS FIRST;
