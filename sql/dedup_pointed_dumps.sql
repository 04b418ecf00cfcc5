-- The dumps a decision file's drops point into.
--
--   $decisions  a decision file
SELECT DISTINCT duplicate_of_dump
FROM read_parquet($decisions)
WHERE NOT keep;
