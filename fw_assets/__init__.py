"""fw_assets: FineWeb-Edu dumps as partitioned Dagster assets, and training mixtures over them.

Layers, lowest first (fw_assets_tests/test_structure.py enforces them): `settings`,
`sampling_policy` and `paths` (every path); `lib/` (tools with no domain); `formats/` (files one
step writes and another reads); `synthetic/` (generated dumps); the Dagster plumbing (`partitions`,
`resources`, `jobs`, `contracts/`, `run_health`); one step folder per part of the chain
(`bucketing/`, `dedup/`, `tokenizing/`, `probe/`, `mixtures/`), each holding its steps' assets with
their check specs, its contract rules and its plain work; and the entry points (`automation/`,
`definitions`, `demo`).
"""

import os

# Arrow's allocator (mimalloc) keeps the pages a thread freed for a while and gives them back only
# when that thread allocates again: a step that reads Parquet in phases, on Arrow's threads, holds
# what each phase freed. 0 gives them back at once (docs/benchmarks.md, 1M to 4M documents:
# `mixture_plan` holds 23 bytes a reweighted document with it, 39 without; `tokenized` 5-10 % less
# memory, ~5 % more CPU). Arrow reads it once a process; set before any module here imports
# pyarrow, and inherited by the processes Dagster starts for runs and steps. A value already in the
# environment is kept.
os.environ.setdefault("MIMALLOC_PURGE_DELAY", "0")
