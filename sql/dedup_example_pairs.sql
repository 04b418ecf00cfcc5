-- Example drops for the UI, both kinds: the first by id among the drops within the dump, and the
-- first by id among those against the one earlier dump most drops point at (ties: the latest),
-- with what they duplicate; $limit / 2 of each kind when both have that many, the rest from the
-- other kind. One earlier dump at most: the texts shown come from the row groups of that dump's
-- minhash file (its text_start) holding the shown ids, and dump 110 has 109 earlier ones.
--
--   $decisions  a decision file;  $dump  its dump;  $limit  how many
WITH drops AS (
    SELECT id, duplicate_of, duplicate_of_dump, similarity, duplicate_of_dump = $dump AS within
    FROM read_parquet($decisions)
    WHERE NOT keep
),
shown AS (
    SELECT $dump AS dump
    UNION ALL
    (
        SELECT duplicate_of_dump
        FROM drops
        WHERE NOT within
        GROUP BY duplicate_of_dump
        ORDER BY count(*) DESC, duplicate_of_dump DESC
        LIMIT 1
    )
),
ranked AS (
    SELECT *, row_number() OVER (PARTITION BY within ORDER BY id) AS rank_in_kind
    FROM drops
    WHERE duplicate_of_dump IN (SELECT dump FROM shown)
)
-- taking the lowest ranks of both kinds alternates them: half each while both last
SELECT id, duplicate_of, duplicate_of_dump, similarity, within
FROM ranked
ORDER BY rank_in_kind, NOT within
LIMIT $limit;
