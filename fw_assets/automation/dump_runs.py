"""The runs of each dump that are queued or under way, and the open backfills still to run it, for
the sensors' rule: never request a dump beside its own run (UI backfill, CLI or sensor, on whichever
host it runs) nor one a backfill will run. The CLI records its runs as STARTED, never queued. A run
that failed and that run retries are about to launch again (its host was lost, say) counts too: its
retry is the dump's next run."""

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


def dumps_in_open_backfills(
    instance: dg.DagsterInstance, asset_graph, asset_key: dg.AssetKey, job_name: str
) -> dict[str, str]:
    """Dump -> an open backfill (id) still to materialize `asset_key` of it: an asset backfill whose
    target holds it, not yet materialized nor failed, or a backfill of the job `job_name` over it.
    Read from Dagster's backfill records (dagster._core: not exported; pinned to 1.13)."""
    from dagster._core.execution.backfill import BulkActionsFilter, BulkActionStatus

    covered: dict[str, str] = {}
    for backfill in instance.get_backfills(filters=BulkActionsFilter(statuses=[BulkActionStatus.REQUESTED])):
        if backfill.is_asset_backfill:
            data = backfill.get_asset_backfill_data(asset_graph)
            pending = data.target_subset - data.materialized_subset - data.failed_and_downstream_subset
            dumps = pending.get_partitions_subset(asset_key).get_partition_keys() if asset_key in pending else []
        else:
            dumps = (backfill.partition_names or []) if backfill.job_name == job_name else []
        for dump in dumps:
            covered.setdefault(dump, backfill.backfill_id)
    return covered
