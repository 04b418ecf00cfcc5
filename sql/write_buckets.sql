-- The kept rows of one dump, only id, text and score, one hive folder per bucket.
--
--   $files      the dump's source parquet files (the same list `select_sample.sql` read)
--   $selection  the selection written by `select_sample.sql`
--   $staging    the folder to write `bucket=<name>/part-<i>.parquet` into
COPY (
    WITH source_files AS (
        SELECT
            unnest($files)                      AS path,
            generate_subscripts($files, 1) - 1  AS file_index
    ),
    -- The kept rows keyed by (file index, row): the join's hash table holds two integers and a
    -- short bucket name per kept row, not its file's path (~150 bytes a row less).
    kept AS (
        SELECT source_files.file_index, sel.source_row, sel.bucket
        FROM read_parquet($selection) AS sel
        JOIN source_files
            ON source_files.path = sel.source_file
        WHERE sel.keep
    )
    SELECT src.id, src.text, src.score, kept.bucket
    FROM read_parquet($files, file_row_number = true) AS src
    JOIN kept
        ON kept.file_index = src.file_index
       AND kept.source_row = src.file_row_number
) TO $staging (
    FORMAT parquet,
    COMPRESSION zstd,
    PARTITION_BY (bucket),
    -- Level 1, as pyarrow (and so the seed's datatrove writer) writes zstd: a third less CPU
    -- than DuckDB's default level 3 for ~12 % larger files (docs/benchmarks.md).
    COMPRESSION_LEVEL 1,
    -- Upper bounds; the bytes bound decides for web pages: row groups of ~4 MB (~700 pages, the
    -- source's are ~5 MB) keep the writer's buffers small and reused. Rows alone made ~45 MB
    -- groups, each buffer freshly paged in: ~1 CPU s more per 1M-document dump (docs/benchmarks.md).
    ROW_GROUP_SIZE 16384,
    ROW_GROUP_SIZE_BYTES 4000000,
    FILENAME_PATTERN 'part-{i}'
);
