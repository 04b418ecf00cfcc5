-- Ids that occur more than once across a set of parquet files (a dump's source files, or every
-- bucket of its output): how many such ids, how many rows carry them, and the first five with
-- their number of copies and the first and last file holding them. The rows carrying them are
-- counted under the rule's name, `id_duplicate` (fw_assets/contracts/rules.py).
--
--   $files  the parquet files to compare, all at once, sorted by path (the first and last file
--           holding an id are then the smallest and largest path)
--
-- Files are told apart by their index in $files, not their path: a path per row in the id hash
-- table cost 2.2x the CPU (0.17 vs 0.08 s per 200k rows, docs/benchmarks.md).
WITH duplicated AS (
    SELECT
        id,
        count(*)        AS copies,
        min(file_index) AS first_file,
        max(file_index) AS last_file
    FROM read_parquet($files)
    WHERE id IS NOT NULL
    GROUP BY id
    HAVING count(*) > 1
)
SELECT
    count(*)                  AS ids,
    coalesce(sum(copies), 0)  AS id_duplicate,
    arg_min(
        {
            'id': id,
            'copies': copies,
            'first_file': $files[first_file::BIGINT + 1],
            'last_file': $files[last_file::BIGINT + 1]
        },
        id,
        5
    )                         AS examples
FROM duplicated;
