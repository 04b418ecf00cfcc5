-- Every band key of a minhash file with the row of its document there, ordered by key (then row,
-- so the order is total and the file the same whatever the thread count).
--
--   $path  the minhash file
SELECT key, "row"::UINTEGER AS "row"
FROM (
    SELECT unnest(band_keys) AS key, file_row_number AS "row"
    FROM read_parquet($path, file_row_number = true)
    WHERE band_keys IS NOT NULL
)
ORDER BY key, "row";
