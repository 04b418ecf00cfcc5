-- The first characters of some documents' texts.
--
--   $files  bucketed parquet files;  $ids  the documents;  $chars  how many characters
SELECT id, left(text, $chars) AS start
FROM read_parquet($files)
WHERE id IN (SELECT unnest($ids));
