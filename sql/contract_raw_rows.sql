-- The raw contract's row rules over every row of a dump, per file: how many rows break each rule
-- and the first five of them. Reads only id, score, dump, file_path and int_score, never text.
-- A rule's count column carries the rule's name (fw_assets/contracts/rules.py), its first
-- failing rows the same name with `_examples`. The rules are disjoint: a null score is only
-- `score_null`, a NaN only `score_not_finite`.
--
--   $files                   the dump's source parquet files
--   $dump                    the partition key every row must carry
--   $score_min, $score_max   the closed range a finite score must lie in
WITH checked AS (
    SELECT
        filename AS file,
        {
            'row': file_row_number,
            'id': id,
            'score': score,
            'dump': dump,
            'file_path': file_path,
            'int_score': int_score
        } AS example,
        id IS NULL AS id_null,
        score IS NULL AS score_null,
        coalesce(NOT isfinite(score), false) AS score_not_finite,
        coalesce(isfinite(score) AND NOT score BETWEEN $score_min AND $score_max, false)
            AS score_out_of_range,
        dump IS DISTINCT FROM $dump AS dump_mismatch,
        NOT coalesce(contains(file_path, 'crawl-data/' || $dump || '/'), false)
            AS file_path_mismatch,
        -- int(round(clamp(score, 0, 5))) with Python's rounding, half to even.
        coalesce(
            isfinite(score)
            AND int_score IS DISTINCT FROM round_even(least(greatest(score, 0), 5), 0)::BIGINT,
            false
        ) AS int_score_mismatch
    FROM read_parquet($files, filename = true, file_row_number = true)
)
SELECT
    file,
    count(*) AS rows,
    count_if(id_null) AS id_null,
    arg_min(example, example.row, 5) FILTER (WHERE id_null) AS id_null_examples,
    count_if(score_null) AS score_null,
    arg_min(example, example.row, 5) FILTER (WHERE score_null) AS score_null_examples,
    count_if(score_not_finite) AS score_not_finite,
    arg_min(example, example.row, 5) FILTER (WHERE score_not_finite) AS score_not_finite_examples,
    count_if(score_out_of_range) AS score_out_of_range,
    arg_min(example, example.row, 5) FILTER (WHERE score_out_of_range)
        AS score_out_of_range_examples,
    count_if(dump_mismatch) AS dump_mismatch,
    arg_min(example, example.row, 5) FILTER (WHERE dump_mismatch) AS dump_mismatch_examples,
    count_if(file_path_mismatch) AS file_path_mismatch,
    arg_min(example, example.row, 5) FILTER (WHERE file_path_mismatch)
        AS file_path_mismatch_examples,
    count_if(int_score_mismatch) AS int_score_mismatch,
    arg_min(example, example.row, 5) FILTER (WHERE int_score_mismatch)
        AS int_score_mismatch_examples
FROM checked
GROUP BY file
ORDER BY file;
