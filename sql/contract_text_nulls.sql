-- Rows with a null text per file, and the first five of them, by reading the files' text column.
-- Used only for the files whose footers do not already rule null texts out. strlen, not
-- `text IS NULL`: DuckDB then reads the texts' bytes without checking that they are UTF-8, so raw
-- never refuses a text for its encoding (bucketed's scan does).
--
--   $files  the parquet files to scan (each has id and text columns)
SELECT
    filename                        AS file,
    count_if(strlen(text) IS NULL)  AS text_null,
    arg_min({'row': file_row_number, 'id': id}, file_row_number, 5) FILTER (WHERE strlen(text) IS NULL)
                                    AS text_null_examples
FROM read_parquet($files, filename = true, file_row_number = true)
GROUP BY filename
ORDER BY filename;
