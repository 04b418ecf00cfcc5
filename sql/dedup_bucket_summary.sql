-- Per bucket: documents decided, dropped as near-duplicates within the dump, dropped against an
-- earlier dump.
--
--   $decisions  a decision file;  $dump  its dump
SELECT
    bucket,
    count(*) AS documents,
    count(*) FILTER (WHERE NOT keep AND duplicate_of_dump = $dump) AS dropped_within_dump,
    count(*) FILTER (WHERE NOT keep AND duplicate_of_dump <> $dump) AS dropped_against_earlier
FROM read_parquet($decisions)
GROUP BY bucket
ORDER BY bucket;
