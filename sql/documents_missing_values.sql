-- Rows of a bucket's files without an id or a text, per file, with a few example ids (error reports).
--
--   $files  the bucket's published parquet files
SELECT
    filename,
    count(*) FILTER (WHERE id IS NULL)                      AS rows_without_id,
    count(*) FILTER (WHERE text IS NULL)                    AS rows_without_text,
    list(id ORDER BY id) FILTER (WHERE text IS NULL)[1:5]   AS example_ids
FROM read_parquet($files, filename = true)
WHERE id IS NULL OR text IS NULL
GROUP BY filename
ORDER BY filename;
