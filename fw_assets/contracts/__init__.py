"""Every step's data contract becomes Dagster asset checks here, one way for all of them.

A step's rules live in its own `contract` module (the bucketing steps' in `*_contract`), plain
code that returns one `CheckOutcome` per asset check (`findings`: what a contract found, naming
dump, file, column, rows and examples). `asset_checks` turns those outcomes into per-dump (or
per-recipe) check results attached to the asset's materialization, or a refusal that publishes
nothing; each asset declares its check specs beside itself with `asset_checks.check_specs`.
"""
