"""The per-dump bucketing chain: raw -> sampled -> bucketed.

Assets (each with its check specs): `raw`, `sampled`, `bucketed`. Plain modules, no Dagster:
`inputs` (a dump's source files), `sample_and_bucket` (the DuckDB work: the selection and the
bucket files), and the contracts: `raw_contract`, `sampled_contract`, `bucketed_contract`, built on
`contract_rules` (every row rule, named once), `contract_schemas` (the same rules as pandera
schemas), `contract_frames` (pandera run on footers and sampled rows) and `contract_tallies` (SQL
tallies turned into violations).
"""
