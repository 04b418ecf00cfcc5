-- Every row of a dump's bucketed output, per file: rows, null ids and scores, and scores outside
-- their bucket's interval, each with the first five failing rows.
--
--   $files        the bucket files to check
--   bucket_files  relation registered by the caller: file (path as in $files), bucket
--   policy        relation registered by the caller, one row per bucket: bucket, low, high, …
SELECT
    out.filename             AS file,
    any_value(placed.bucket) AS bucket,
    count(*)                 AS rows,
    count_if(out.id IS NULL) AS id_null,
    arg_min({'row': out.file_row_number, 'id': out.id}, out.file_row_number, 5)
        FILTER (WHERE out.id IS NULL) AS id_null_examples,
    count_if(out.score IS NULL) AS score_null,
    arg_min({'row': out.file_row_number, 'id': out.id}, out.file_row_number, 5)
        FILTER (WHERE out.score IS NULL) AS score_null_examples,
    count_if(NOT coalesce(out.score >= bounds.low AND out.score < bounds.high, false))
        AS score_outside_bucket,
    arg_min(
        {'row': out.file_row_number, 'id': out.id, 'score': out.score},
        out.file_row_number,
        5
    ) FILTER (
        WHERE NOT coalesce(out.score >= bounds.low AND out.score < bounds.high, false)
    ) AS score_outside_bucket_examples
FROM read_parquet($files, filename = true, file_row_number = true) AS out
JOIN bucket_files AS placed
    ON placed.file = out.filename
LEFT JOIN policy AS bounds
    ON bounds.bucket = placed.bucket
GROUP BY out.filename
ORDER BY out.filename;
