-- Ids that occur more than once across a set of parquet files (a dump's source files, or every
-- bucket of its output): how many such ids, how many rows carry them, and the first five with
-- their number of copies and the first and last file holding them. The rows carrying them are
-- counted under the rule's name, `id_duplicate` (fw_assets/contracts/rules.py).
--
--   $files  the parquet files to compare, all at once
WITH duplicated AS (
    SELECT
        id,
        count(*)      AS copies,
        min(filename) AS first_file,
        max(filename) AS last_file
    FROM read_parquet($files, filename = true)
    WHERE id IS NOT NULL
    GROUP BY id
    HAVING count(*) > 1
)
SELECT
    count(*)                  AS ids,
    coalesce(sum(copies), 0)  AS id_duplicate,
    arg_min(
        {'id': id, 'copies': copies, 'first_file': first_file, 'last_file': last_file}, id, 5
    )                         AS examples
FROM duplicated;
