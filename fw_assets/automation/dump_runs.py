"""The runs of each dump that are queued or under way, for the sensors' rule: never request a dump
beside its own run (UI backfill, CLI or sensor), on whichever host it runs. The CLI records its runs
as STARTED, never queued. A run that failed and that run retries are about to launch again (its host
was lost, say) counts too: its retry is the dump's next run."""

import dagster as dg

from fw_assets.jobs import probe_losses_job

# Dagster tags every run of one partition with it, and a failed run that run retries will launch
# again with the second (neither is exported by `dagster`).
PARTITION_TAG = "dagster/partition"
WILL_RETRY_TAG = "dagster/will_retry"
PROBE_LOSS = dg.AssetKey("probe_loss")  # the one asset of `probe_losses`; no step's module is imported here
UNFINISHED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def unfinished_runs(instance: dg.DagsterInstance, asset_key: dg.AssetKey | None = None) -> dict[str, dg.DagsterRun]:
    """Dump -> a queued, in-progress or about-to-be-retried run of it (one that materializes
    `asset_key`, if given: a run without an asset selection runs its whole job, the dump's chain, or
    for `probe_losses` its probe losses)."""
    runs = list(instance.get_runs(dg.RunsFilter(statuses=UNFINISHED)))
    failed = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE], tags={WILL_RETRY_TAG: "true"}))
    runs += [run for run in failed if run.is_complete_and_waiting_to_retry]
    return {
        run.tags[PARTITION_TAG]: run
        for run in runs
        if PARTITION_TAG in run.tags and (asset_key is None or _materializes(run, asset_key))
    }


def _materializes(run: dg.DagsterRun, asset_key: dg.AssetKey) -> bool:
    if run.asset_selection is not None:
        return asset_key in run.asset_selection
    return (asset_key == PROBE_LOSS) == (run.job_name == probe_losses_job.name)
