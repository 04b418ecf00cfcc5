-- Candidate pairs between the dump being decided and one earlier dump: documents sharing a band
-- key. One earlier file per statement, streamed against the dump's own keys, so memory follows
-- the dump's size and not the number of earlier dumps.
--
--   $path  the earlier dump's minhash file
WITH earlier AS (
    SELECT
        id,
        signature,
        unnest(band_keys) AS key,
        unnest(range(len(band_keys))) AS band
    FROM read_parquet($path)
    WHERE band_keys IS NOT NULL
),
pairs AS (
    SELECT k.id, e.id AS other, min(k.band) AS band, any_value(e.signature) AS other_signature
    FROM current_keys AS k
    JOIN earlier AS e USING (key)
    GROUP BY k.id, e.id
)
SELECT p.id, p.other, p.band, d.signature, p.other_signature
FROM pairs AS p
JOIN current_documents AS d USING (id);
