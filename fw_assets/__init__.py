"""fw_assets: FineWeb-Edu dumps as partitioned Dagster assets (sample, bucket, tokenize)."""
