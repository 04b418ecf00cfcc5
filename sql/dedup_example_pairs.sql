-- Example drops for the UI: the first by id among the drops within the dump and against the one
-- earlier dump most drops point at (ties: the latest), with what they duplicate. One earlier dump
-- at most: the texts shown come from the row groups of that dump's minhash file (its text_start)
-- holding the shown ids, and dump 110 has 109 earlier ones.
--
--   $decisions  a decision file;  $dump  its dump;  $limit  how many
WITH drops AS (
    SELECT id, duplicate_of, duplicate_of_dump, similarity
    FROM read_parquet($decisions)
    WHERE NOT keep
),
shown AS (
    SELECT $dump AS dump
    UNION ALL
    (
        SELECT duplicate_of_dump
        FROM drops
        WHERE duplicate_of_dump <> $dump
        GROUP BY duplicate_of_dump
        ORDER BY count(*) DESC, duplicate_of_dump DESC
        LIMIT 1
    )
)
SELECT id, duplicate_of, duplicate_of_dump, similarity
FROM drops
WHERE duplicate_of_dump IN (SELECT dump FROM shown)
ORDER BY id
LIMIT $limit;
