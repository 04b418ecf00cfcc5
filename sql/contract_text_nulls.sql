-- Rows with a null text per file, and the first five of them, by reading the files' text column.
-- Used only for the files whose footers do not already rule null texts out.
--
--   $files  the parquet files to scan (each has id and text columns)
SELECT
    filename                AS file,
    count_if(text IS NULL)  AS text_null,
    arg_min({'row': file_row_number, 'id': id}, file_row_number, 5) FILTER (WHERE text IS NULL)
                            AS text_null_examples
FROM read_parquet($files, filename = true, file_row_number = true)
GROUP BY filename
ORDER BY filename;
