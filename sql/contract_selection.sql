-- Per bucket of a written selection (bucket NULL: below every bucket): rows in, kept, dropped,
-- rows without a decision, rows kept below every bucket, and the rows whose bucket is not the
-- one the policy gives their score, with the first five. A rule's count column carries the
-- rule's name (fw_assets/contracts/rules.py).
--
--   $selection  the selection parquet file written by `select_sample.sql`
--   policy      relation registered by the caller, one row per bucket: bucket, low, high, …
SELECT
    sel.bucket,
    count(*)                AS rows_in,
    count_if(sel.keep)      AS kept,
    count_if(NOT sel.keep)  AS dropped,
    count_if(sel.keep IS NULL) AS keep_null,
    count_if(sel.keep AND sel.bucket IS NULL) AS kept_below_buckets,
    count_if(sel.bucket IS DISTINCT FROM expected.bucket) AS bucket_mismatch,
    arg_min(
        {
            'row': sel.source_row,
            'id': sel.id,
            'score': sel.score,
            'bucket': sel.bucket,
            'expected': expected.bucket
        },
        sel.id,
        5
    ) FILTER (WHERE sel.bucket IS DISTINCT FROM expected.bucket) AS bucket_mismatch_examples
FROM read_parquet($selection) AS sel
LEFT JOIN policy AS expected
    ON sel.score >= expected.low AND sel.score < expected.high
GROUP BY sel.bucket
ORDER BY sel.bucket NULLS FIRST;
