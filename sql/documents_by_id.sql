-- The documents of one bucket of one dump, in a fixed order, for tokenizing.
--
-- The published bucket files' row order depends on DuckDB's parallel writer. Ordering by id (then
-- text, should two rows share an id) makes the token files the same bytes on every run, at any
-- thread or worker count. The sort spills to the connection's temp_directory beyond its memory_limit.
--
--   $files  the bucket's published parquet files
SELECT id, text
FROM read_parquet($files)
ORDER BY id, text;
