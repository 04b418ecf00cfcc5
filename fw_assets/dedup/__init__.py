"""Near-duplicates across dumps (seed design 001): MinHash-LSH signatures per dump, and per-dump
decisions in which the earliest crawl wins. Plain modules, no Dagster: the assets wrap them."""
