-- Decode every text of the files. DuckDB checks that a string is valid UTF-8 when it decodes it,
-- so this fails on the first text that is not; its error names a file and the value, never the
-- row (fw_assets.contracts.tallies then finds the rows, file by file). The only contract statement
-- that reads the text column of every row.
--
--   $files  the parquet files to read (each has a text column)
SELECT
    count(text)         AS texts,
    sum(length(text))   AS characters
FROM read_parquet($files);
