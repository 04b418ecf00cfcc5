-- The minhash rows of the dump being decided, held for the whole decision.
--
--   $path  the dump's minhash file
CREATE OR REPLACE TEMP TABLE current_documents AS
SELECT id, bucket, score, signature
FROM read_parquet($path);
