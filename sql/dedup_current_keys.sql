-- One row per (document, band) of the dump being decided; a key already encodes its band.
CREATE OR REPLACE TEMP TABLE current_keys AS
SELECT id, unnest(band_keys) AS key
FROM current_documents
WHERE band_keys IS NOT NULL;
