-- One decision per document of the dump, in id order: kept unless the registered `drops` names it.
-- `current_documents` (id, bucket) is registered from the rows the decisions read, checksums verified.
SELECT
    d.id,
    d.bucket,
    x.id IS NULL AS keep,
    x.duplicate_of,
    x.duplicate_of_dump,
    x.similarity
FROM current_documents AS d
LEFT JOIN drops AS x USING (id)
ORDER BY d.id;
