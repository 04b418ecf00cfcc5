"""The runs of each dump that are queued or under way, for the sensors' rule: never request a dump
beside its own run (UI backfill, CLI or sensor). The CLI records its runs as STARTED, never queued."""

import dagster as dg

from fw_assets.jobs import probe_losses_job

# Dagster tags every run of one partition with it (not exported by `dagster`).
PARTITION_TAG = "dagster/partition"
PROBE_LOSS = dg.AssetKey("probe_loss")  # the one asset of `probe_losses`; no stage is imported here
UNFINISHED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def unfinished_runs(instance: dg.DagsterInstance, asset_key: dg.AssetKey | None = None) -> dict[str, str]:
    """Dump -> the id of a queued or in-progress run of it (one that materializes `asset_key`,
    if given: a run without an asset selection runs its whole job, the dump's chain, or for
    `probe_losses` its probe losses)."""
    runs = instance.get_runs(dg.RunsFilter(statuses=UNFINISHED))
    return {
        run.tags[PARTITION_TAG]: run.run_id
        for run in runs
        if PARTITION_TAG in run.tags and (asset_key is None or _materializes(run, asset_key))
    }


def _materializes(run: dg.DagsterRun, asset_key: dg.AssetKey) -> bool:
    if run.asset_selection is not None:
        return asset_key in run.asset_selection
    return (asset_key == PROBE_LOSS) == (run.job_name == probe_losses_job.name)
