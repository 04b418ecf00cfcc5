-- Candidate pairs between the dump being decided and one earlier dump: documents sharing a band
-- key. One earlier file per statement, streamed against the dump's own keys, so memory follows
-- the dump's size and not the number of earlier dumps. The join carries only ids and keys; the
-- earlier signatures are read back for the candidates alone.
--
--   $path  the earlier dump's minhash file
WITH earlier_keys AS (
    SELECT id, unnest(band_keys) AS key
    FROM read_parquet($path)
    WHERE band_keys IS NOT NULL
),
pairs AS (
    SELECT DISTINCT k.id, e.id AS other
    FROM current_keys AS k
    JOIN earlier_keys AS e USING (key)
),
earlier_signatures AS (
    SELECT id AS other, signature AS other_signature
    FROM read_parquet($path)
    WHERE id IN (SELECT other FROM pairs)
)
SELECT p.id, p.other, d.signature, s.other_signature
FROM pairs AS p
JOIN current_documents AS d USING (id)
JOIN earlier_signatures AS s USING (other);
