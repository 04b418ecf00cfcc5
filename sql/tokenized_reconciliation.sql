-- A bucket's token documents against the ids its dedup decisions keep: kept ids not tokenized,
-- and tokenized ids not kept (dropped as near-duplicates, or unknown).
--
--   $decisions  the dump's dedup decision file;  $bucket  the bucket;  $docs  its docs sidecar
WITH kept AS (
    SELECT id FROM read_parquet($decisions) WHERE keep AND bucket = $bucket
),
tokenized AS (
    SELECT id FROM read_parquet($docs)
)
SELECT 'kept_not_tokenized' AS rule, count(*) AS rows, list(id ORDER BY id)[1:5] AS examples
FROM kept ANTI JOIN tokenized USING (id)
UNION ALL
SELECT 'tokenized_not_kept', count(*), list(id ORDER BY id)[1:5]
FROM tokenized ANTI JOIN kept USING (id);
