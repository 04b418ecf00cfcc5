"""The contracts as Dagster asset checks on raw, sampled and bucketed, one result per dump.

Each asset computes its contract once, inside its own step: it yields one check result per
contract check (figures and violations as metadata), then, if a blocking check failed, raises
before anything is published, so the dump's previous output stays and the stages after it are
skipped. The specs are blocking as well, which keeps that true for anyone yielding a failed
result without raising.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import dagster as dg
import duckdb

from fw_assets.contracts.bucketed import BUCKETED_CHECKS
from fw_assets.contracts.findings import CheckOutcome, ContractCheck, rejection_message
from fw_assets.contracts.raw import RAW_CHECKS, RAW_KEY_COLUMNS
from fw_assets.contracts.selection import SELECTION_CHECKS
from fw_assets.contracts.tallies import unreadable_file_violations
from fw_assets.partitions import dump_partitions


def check_specs(asset: str, checks: Sequence[ContractCheck]) -> list[dg.AssetCheckSpec]:
    """Per-dump asset checks of `asset`, one per contract check."""
    return [
        dg.AssetCheckSpec(
            check.name,
            asset=asset,
            description=check.description,
            blocking=check.blocking,
            partitions_def=dump_partitions,
        )
        for check in checks
    ]


# What a bucketing asset yields: its check results, then its materialization.
Events = Iterator[dg.AssetCheckResult | dg.MaterializeResult]

RAW_CHECK_SPECS = check_specs("raw", RAW_CHECKS)
SAMPLED_CHECK_SPECS = check_specs("sampled", SELECTION_CHECKS)
BUCKETED_CHECK_SPECS = check_specs("bucketed", BUCKETED_CHECKS)


def check_result(outcome: CheckOutcome) -> dg.AssetCheckResult:
    """The outcome as Dagster shows it: pass/fail, severity, figures and violations."""
    metadata: dict[str, dg.RawMetadataValue] = dict(outcome.figures)
    metadata["failing_rows"] = sum(v.rows for v in outcome.violations)
    if outcome.details:
        metadata["details"] = dg.MetadataValue.md(outcome.details)
    if outcome.violations:
        metadata["violations"] = dg.MetadataValue.md(outcome.violations_table())
        metadata["problems"] = dg.MetadataValue.json([v.describe() for v in outcome.violations])
    return dg.AssetCheckResult(
        check_name=outcome.check.name,
        passed=outcome.passed,
        severity=dg.AssetCheckSeverity.ERROR if outcome.check.blocking else dg.AssetCheckSeverity.WARN,
        metadata=metadata,
    )


def report(dump: str, stage: str, outcomes: Sequence[CheckOutcome]) -> Iterator[dg.AssetCheckResult]:
    """Yield every outcome as a check result, then stop the step if a blocking check failed."""
    for outcome in outcomes:
        yield check_result(outcome)
    guard(dump, stage, outcomes)


def guard(dump: str, stage: str, outcomes: Sequence[CheckOutcome]) -> None:
    """Raise a `dg.Failure` naming every blocking violation; do nothing if none."""
    blocking = [o for o in outcomes if o.blocks]
    if blocking:
        raise dg.Failure(
            description=rejection_message(dump, stage, blocking),
            metadata={
                "dump": dump,
                "failed_checks": ", ".join(o.check.name for o in blocking),
                "failing_rows": sum(v.rows for o in blocking for v in o.violations),
                "problems": dg.MetadataValue.json(
                    [f"{o.check.name}: {v.describe()}" for o in blocking for v in o.violations]
                ),
            },
        )


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
