-- Decode every column the chain reads from source files, to find which file DuckDB cannot read
-- through after a statement over all of them failed. Run on one file at a time.
--
--   $files  the source parquet files to read
SELECT
    count(id)           AS ids,
    sum(length(text))   AS text_characters,
    sum(score)          AS score_sum,
    count(dump)         AS dumps,
    count(file_path)    AS file_paths,
    sum(int_score)      AS int_score_sum
FROM read_parquet($files);
