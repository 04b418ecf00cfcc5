-- Each bucket's written ids against the ids the selection kept in that bucket: ids written but
-- not kept there, and kept ids missing from the output, each with the first five.
--
--   $files        the bucket files of the dump
--   $selection    the selection the output was written from
--   bucket_files  relation registered by the caller: file (path as in $files), bucket
SELECT
    coalesce(written.bucket, kept.bucket)                  AS bucket,
    count_if(kept.bucket IS NULL)                          AS not_kept,
    arg_min(written.id, written.id, 5) FILTER (WHERE kept.bucket IS NULL) AS not_kept_examples,
    count_if(written.bucket IS NULL)                       AS missing,
    arg_min(kept.id, kept.id, 5) FILTER (WHERE written.bucket IS NULL)    AS missing_examples
FROM (
    SELECT placed.bucket, out.id
    FROM read_parquet($files, filename = true) AS out
    JOIN bucket_files AS placed
        ON placed.file = out.filename
) AS written
FULL OUTER JOIN (
    SELECT bucket, id
    FROM read_parquet($selection)
    WHERE keep
) AS kept
    ON kept.id = written.id AND kept.bucket = written.bucket
GROUP BY ALL
ORDER BY bucket;
