-- Null count of one column per file, from the parquet footers' statistics: no data is read.
-- A file with a column chunk that carries no null count is reported with nulls = NULL, and the
-- caller counts that file by scanning it instead.
--
--   $files   the parquet files
--   $column  the column's name (its path in the parquet schema)
SELECT
    file_name AS file,
    CASE
        WHEN count(stats_null_count) = count(*) THEN sum(stats_null_count)
    END       AS nulls
FROM parquet_metadata($files)
WHERE path_in_schema = $column
GROUP BY file_name
ORDER BY file_name;
