"""The runs of each dump that are queued or under way, for the sensors' rule: never request a dump
beside its own run (UI backfill, CLI or sensor). The CLI records its runs as STARTED, never queued."""

import dagster as dg

# Dagster tags every run of one partition with it (not exported by `dagster`).
PARTITION_TAG = "dagster/partition"
UNFINISHED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def unfinished_runs(instance: dg.DagsterInstance, asset_key: dg.AssetKey | None = None) -> dict[str, str]:
    """Dump -> the id of a queued or in-progress run of it (one that materializes `asset_key`,
    if given: a run without an asset selection runs its whole job, the dump's chain)."""
    runs = instance.get_runs(dg.RunsFilter(statuses=UNFINISHED))
    return {
        run.tags[PARTITION_TAG]: run.run_id
        for run in runs
        if PARTITION_TAG in run.tags
        and (asset_key is None or run.asset_selection is None or asset_key in run.asset_selection)
    }
