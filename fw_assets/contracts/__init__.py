"""Data contracts of the bucketing chain: what raw input, the sampled selection and the bucketed
output must satisfy before anything is published, and what a user is told when they do not.

`schemas` states them as pandera schemas; `raw`, `selection` and `bucketed` enforce them on a
whole dump (footers, DuckDB aggregates over every row, samples for deeper text checks) and return
one `CheckOutcome` per asset check. Nothing here depends on Dagster.
"""
