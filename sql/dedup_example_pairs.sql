-- Example drops for the UI: the first by id, with what they duplicate.
--
--   $decisions  a decision file;  $limit  how many
SELECT id, duplicate_of, duplicate_of_dump, similarity
FROM read_parquet($decisions)
WHERE NOT keep
ORDER BY id
LIMIT $limit;
