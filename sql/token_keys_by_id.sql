-- Where each document of a bucket lies in its scratch token file, in id order: the order of the
-- published token files, whatever order the documents were encoded in.
--
-- About 70 bytes a document, not its text: a small sort, spilling to the connection's
-- temp_directory beyond its memory_limit.
--
--   $keys  the bucket's scratch keys parquet (id, text_hash, token_offset, token_count)
SELECT
    id,
    token_offset,
    token_count
FROM read_parquet($keys)
ORDER BY id, text_hash;
