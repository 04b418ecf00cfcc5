-- How similar the dropped documents are to what they duplicate: drops per 0.05 of estimated
-- Jaccard (bin 0.85 holds [0.85, 0.90)).
--
--   $decisions  a decision file
SELECT floor(similarity * 20) / 20 AS low, count(*) AS dropped
FROM read_parquet($decisions)
WHERE NOT keep
GROUP BY low
ORDER BY low;
