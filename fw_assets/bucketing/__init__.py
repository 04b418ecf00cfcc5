"""The per-dump bucketing chain: raw -> sampled -> bucketed."""
