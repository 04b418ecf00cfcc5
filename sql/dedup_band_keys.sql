-- The band keys of one document in one dump's minhash file.
--
--   $path  the minhash file;  $id  the document
SELECT band_keys
FROM read_parquet($path)
WHERE id = $id;
