-- The documents of one bucket of one dump, to tokenize in whatever order DuckDB reads them.
--
-- No ORDER BY: the texts are never sorted. Their tokens go to a scratch file in this order, and
-- only the small keys are ordered by id afterwards (token_keys_by_id.sql). text_hash breaks ties
-- between rows sharing an id (the bucketed contracts refuse those), so the published order never
-- depends on the order the rows were read in. `blank` marks a text of nothing but whitespace,
-- separators and invisible format characters (zero-width space, BOM, ...): the step drops those
-- and counts them. The anchored match stops at a text's first visible character.
--
--   $files  the bucket's published parquet files
SELECT
    id,
    text,
    hash(text) AS text_hash,
    regexp_full_match(text, '[\s\x{0B}\x{85}\pZ\p{Cf}]*') AS blank
FROM read_parquet($files);
