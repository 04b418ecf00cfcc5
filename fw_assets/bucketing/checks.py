"""The bucketing stage's contracts as per-dump asset checks of raw, sampled and bucketed.

Each asset computes its contract once, inside its own step, and reports it through
`fw_assets.asset_checks.ContractReport`: check results attached to its materialization, or, if a
blocking check failed, reported on their own before the step fails with nothing published.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import duckdb

from fw_assets.asset_checks import check_specs, guard
from fw_assets.contracts.bucketed import BUCKETED_CHECKS
from fw_assets.contracts.raw import RAW_CHECKS, RAW_KEY_COLUMNS
from fw_assets.contracts.selection import SELECTION_CHECKS
from fw_assets.contracts.tallies import unreadable_file_violations

RAW_CHECK_SPECS = check_specs("raw", RAW_CHECKS)
SAMPLED_CHECK_SPECS = check_specs("sampled", SELECTION_CHECKS)
BUCKETED_CHECK_SPECS = check_specs("bucketed", BUCKETED_CHECKS)


@contextmanager
def naming_unreadable_files(
    con: duckdb.DuckDBPyConnection, dump: str, stage: str, paths: Sequence[str]
) -> Iterator[None]:
    """Turn DuckDB failing on a damaged page of a source file (its error does not say which file)
    into a failure that names the file; other errors pass through unchanged."""
    try:
        yield
    except duckdb.Error:
        unreadable = unreadable_file_violations(con, paths)
        if not unreadable:
            raise
        guard(dump, stage, [RAW_KEY_COLUMNS.outcome(unreadable)])
        raise
