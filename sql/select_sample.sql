-- The sampler of record (docs/sampling.md#the-sampler-of-record), decided for every row of one dump.
-- Reads only `id` and `score`: the text is not touched until `write_buckets.sql`.
--
--   $files      the dump's source parquet files
--   $selection  the parquet file to write
--   policy      relation registered by the caller, one row per bucket:
--               bucket, low, high, rate, hash_prefix ('42_'), hash_suffix ('_2.8_3.0')
COPY (
    SELECT
        source_file,
        source_row,
        id,
        score,
        bucket,
        CASE
            WHEN rate >= 1 THEN true
            WHEN digest IS NOT NULL THEN
                -- Python's int(md5(key).hexdigest(), 16) % 10000, with the 128-bit number
                -- N = hi * 2^64 + lo taken as its two 64-bit hex halves:
                -- N % 10000 = (hi % 10000 * (2^64 % 10000) + lo % 10000) % 10000, 2^64 % 10000 = 1616.
                -- Casting all 32 hex digits to UHUGEINT gives the same number at 3x the cost;
                -- md5_number() reads the digest's bytes in another order.
                (('0x' || digest[1:16])::UBIGINT % 10000 * 1616
                 + ('0x' || digest[17:32])::UBIGINT % 10000)
                    % 10000 / 10000 < rate
            ELSE false
        END IS TRUE AS keep
    FROM (
        SELECT
            src.filename        AS source_file,
            src.file_row_number AS source_row,
            src.id,
            src.score,
            policy.bucket,
            policy.rate,
            -- Hashed once, in its own column (a CASE branch would compute it once per use), and
            -- only where the rate leaves a choice: 0 < rate < 1.
            CASE
                WHEN policy.rate > 0 AND policy.rate < 1
                    THEN md5(policy.hash_prefix || src.id || policy.hash_suffix)
            END                 AS digest
        FROM read_parquet($files, filename = true, file_row_number = true) AS src
        LEFT JOIN policy
            ON src.score >= policy.low AND src.score < policy.high
    )
) TO $selection (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1);
