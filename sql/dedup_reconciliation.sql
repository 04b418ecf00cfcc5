-- Violations of the decisions' reconciliation, one row per rule broken: exactly one
-- decision per bucketed id, and every pointer names a document of the dump it says (this dump's or
-- an earlier dump's minhash file), kept when it is in this dump.
--
--   $decisions  the staged decision file;  $dump  the dump decided;  view `bucketed_ids` (id): the
--   dump's bucketed documents;  registered `pointed_ids` (id, dump): the documents of the minhash
--   files of the dumps the pointers name whose id some drop points at
WITH decisions AS (
    SELECT * FROM read_parquet($decisions)
),
bucketed AS (
    SELECT id FROM bucketed_ids
),
pointers AS (
    SELECT id, duplicate_of, duplicate_of_dump FROM decisions WHERE NOT keep
),
problems AS (
    SELECT 'decision_missing' AS rule, b.id
    FROM bucketed AS b ANTI JOIN decisions AS d USING (id)
    UNION ALL
    SELECT 'not_bucketed', d.id
    FROM decisions AS d ANTI JOIN bucketed AS b USING (id)
    UNION ALL
    SELECT 'decided_twice', id
    FROM decisions GROUP BY id HAVING count(*) > 1
    UNION ALL
    SELECT 'pointer_unknown', p.id
    FROM pointers AS p
    ANTI JOIN pointed_ids AS x ON x.id = p.duplicate_of AND x.dump = p.duplicate_of_dump
    UNION ALL
    SELECT 'pointer_not_earlier', id
    FROM pointers WHERE duplicate_of_dump > $dump
    UNION ALL
    SELECT 'pointer_dropped', p.id
    FROM pointers AS p
    JOIN decisions AS d ON d.id = p.duplicate_of
    WHERE p.duplicate_of_dump = $dump AND NOT d.keep
)
SELECT rule, count(*) AS rows, list(id ORDER BY id)[1:5] AS examples
FROM problems
GROUP BY rule
ORDER BY rule;
