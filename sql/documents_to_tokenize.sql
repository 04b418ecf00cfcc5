-- The kept documents of one bucket of one dump, to tokenize in whatever order DuckDB reads them.
--
-- No ORDER BY: the texts are never sorted. Their tokens go to a scratch file in this order, and
-- only the small keys are ordered by id afterwards (token_keys_by_id.sql). text_hash breaks ties
-- between rows sharing an id (the bucketed contracts refuse those), so the published order never
-- depends on the order the rows were read in. `blank` marks a text of nothing but whitespace,
-- separators and invisible format characters (zero-width space, BOM, ...): the step drops those
-- and counts them. id_hash picks the documents tiktoken encodes again to check the backend's tokens
-- (oracle.py). The anchored match stops at a text's first visible character. Documents the
-- dump's dedup decisions drop are left out.
--
--   $files  the bucket's published parquet files;  $decisions  the dump's dedup decision file
--   $bucket  the bucket
SELECT
    id,
    text,
    hash(text) AS text_hash,
    hash(id) AS id_hash,
    regexp_full_match(text, '[\s\x{0B}\x{85}\pZ\p{Cf}]*') AS blank
FROM read_parquet($files)
WHERE id IN (SELECT id FROM read_parquet($decisions) WHERE keep AND bucket = $bucket);
