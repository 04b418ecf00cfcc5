-- Decode every text of the files. DuckDB checks that a string is valid UTF-8 when it decodes it,
-- so this fails on the first text that is not; its error names a file and the value, never the
-- row (fw_assets.contracts.tallies then finds the rows, file by file). The only contract statement
-- that reads the text column of every row. Its cost is decompressing the texts: read as BLOB
-- (no UTF-8 check) they cost the same. strlen, not length: counting characters added ~10 %.
--
--   $files  the parquet files to read (each has a text column)
SELECT
    count(text)         AS texts,
    max(strlen(text))   AS longest_bytes
FROM read_parquet($files);
