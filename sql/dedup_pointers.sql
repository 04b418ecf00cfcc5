-- What a decision file's drops point at: each distinct (dump, id) named by a drop.
--
--   $decisions  a decision file
SELECT DISTINCT duplicate_of_dump, duplicate_of
FROM read_parquet($decisions)
WHERE NOT keep;
