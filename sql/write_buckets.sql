-- The kept rows of one dump, only id, text and score, one hive folder per bucket.
--
--   $files      the dump's source parquet files (the same list `select_sample.sql` read)
--   $selection  the selection written by `select_sample.sql`
--   $staging    the folder to write `bucket=<name>/part-<i>.parquet` into
COPY (
    SELECT src.id, src.text, src.score, kept.bucket
    FROM read_parquet($files, filename = true, file_row_number = true) AS src
    JOIN (
        SELECT source_file, source_row, bucket
        FROM read_parquet($selection)
        WHERE keep
    ) AS kept
        ON kept.source_file = src.filename
       AND kept.source_row = src.file_row_number
) TO $staging (
    FORMAT parquet,
    COMPRESSION zstd,
    PARTITION_BY (bucket),
    -- Level 1, as pyarrow (and so the seed's datatrove writer) writes zstd: a third less CPU
    -- than DuckDB's default level 3 for ~12 % larger files (BENCHMARKS.md).
    COMPRESSION_LEVEL 1,
    -- An upper bound: the connection's partitioned_write_flush_threshold (rows a thread buffers
    -- before writing, see resources.py) makes row groups of ~2.5k-10k web pages.
    ROW_GROUP_SIZE 16384,
    FILENAME_PATTERN 'part-{i}'
);
