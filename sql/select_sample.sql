-- The sampler of record (seed design 000), decided for every row of one dump.
-- Reads only `id` and `score`: the text is not touched until `write_buckets.sql`.
--
--   $files      the dump's source parquet files
--   $selection  the parquet file to write
--   policy      relation registered by the caller, one row per bucket:
--               bucket, low, high, rate, hash_prefix ('42_'), hash_suffix ('_2.8_3.0')
COPY (
    SELECT
        src.filename        AS source_file,
        src.file_row_number AS source_row,
        src.id,
        src.score,
        policy.bucket,
        CASE
            WHEN policy.rate >= 1 THEN true
            WHEN policy.rate > 0 THEN
                -- Python's int(md5(key).hexdigest(), 16): the hex digest read as one number.
                -- md5_number() would read the digest's bytes in another order.
                ('0x' || md5(policy.hash_prefix || src.id || policy.hash_suffix))::UHUGEINT
                    % 10000 / 10000 < policy.rate
            ELSE false
        END IS TRUE         AS keep
    FROM read_parquet($files, filename = true, file_row_number = true) AS src
    LEFT JOIN policy
        ON src.score >= policy.low AND src.score < policy.high
) TO $selection (FORMAT parquet, COMPRESSION zstd);
