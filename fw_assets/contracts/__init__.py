"""Data contracts of the bucketing chain: what raw input, the sampled selection and the bucketed
output must satisfy before anything is published, and what a user is told when they do not.

`rules` names every row rule once; `schemas` states them as pandera schemas, `sql/contract_*.sql`
counts them at scale, and `tallies` turns those counts into violations. `raw`, `selection` and
`bucketed` enforce a stage's contract on a whole dump (footers, DuckDB aggregates over every row,
samples for deeper text checks) and return one `CheckOutcome` per asset check; each declares the
statements and modules it runs (`CONTRACT_SQL`, `CONTRACT_MODULES`) for the code versions of the
assets applying it. Nothing here depends on Dagster.
"""
