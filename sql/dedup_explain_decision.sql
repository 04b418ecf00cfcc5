-- The decision about one document, searched in every dump's decision file.
--
--   $files  the decision files;  $id  the document
SELECT filename, bucket, keep, duplicate_of, duplicate_of_dump, similarity
FROM read_parquet($files, filename = true)
WHERE id = $id;
