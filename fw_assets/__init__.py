"""fw_assets: FineWeb-Edu dumps as partitioned Dagster assets, and training mixtures over them.

Layers, lowest first (fw_assets_tests/test_structure.py enforces them): `settings`,
`sampling_policy` and `paths` (every path); `lib/` (tools with no domain); `formats/` (files one
stage writes and another reads); `synthetic/` (generated dumps); the Dagster plumbing (`partitions`,
`resources`, `jobs`, `contracts/`, `run_health`); one folder per stage (`bucketing/`, `dedup/`,
`tokenizing/`, `probe/`, `mixtures/`), each holding its assets with their check specs, its contract
rules and its plain work; and the entry points (`automation/`, `definitions`, `demo`).
"""
