"""Near-duplicates across dumps (docs/near-duplicates.md): MinHash-LSH signatures per dump, and per-dump
decisions in which the earliest crawl wins.

"minhash" names the asset only; the algorithm is signing, its files are signature files.

Assets (each module exports its asset only):
- minhash.py: `minhash`, each bucketed document's band keys and signature, one set of files a dump.
- band_key_index.py: `band_key_index`, a dump's sorted keys and signatures as later dumps'
  decisions read them (materialized last in a dump's signing run; its data version is the dump's
  content version).
- deduplicated.py: `deduplicated`, one decision per bucketed id of a dump.

Dagster glue:
- band_key_lineage.py: what band_key_index and deduplicated share: the partition mapping to later
  dumps, the check of a dump's content version against its record, and the metadata key of the
  versions a decision was decided against.

Plain modules, no Dagster (the assets wrap them):
- minhash_policy.py: the MinHash-LSH parameters and decision settings of record.
- shingling/: text to word n-gram shingle hashes (entry point: `shingles`).
- signing.py: MinHash signatures, LSH band keys, similarity estimates.
- signature_files.py: the minhash files (parquet, signatures and sorted keys beside it) and their
  content version.
- sorted_keys.py: a dump's band keys sorted by key, and the matching of two dumps' keys.
- row_groups.py: files written in fixed row groups, so their bytes depend on the rows alone.
- checked_arrow.py: Arrow files whose columns carry a digest, checked whenever they are read.
- decide.py: a dump's decisions from its minhash files and the earlier dumps'.
- contract.py: the decisions' contract (reconciliation, drop share) and the UI's tables of them.
- explain.py and __main__.py: `python -m fw_assets.dedup explain ID`, why a document was kept or
  dropped.
"""
