-- The minhash rows of the dump being decided, held for the whole decision.
--
-- From the registered `current_minhash`: those rows as pyarrow read them, page checksums verified
-- (DuckDB's parquet reader does not verify them, so a damaged page would decide silently).
CREATE OR REPLACE TEMP TABLE current_documents AS
SELECT id, bucket, score, signature
FROM current_minhash;
