-- The texts of the documents one bucket's token files hold (the dump's kept, non-blank documents),
-- for the model probe to score, in whatever order DuckDB reads them: the texts are never sorted,
-- the small loss rows are ordered by id afterwards (fw_assets.probe.steps).
--
--   $files  the bucket's published parquet files;  $docs  its token files' .docs.parquet
SELECT id, text
FROM read_parquet($files)
WHERE id IN (SELECT id FROM read_parquet($docs));
