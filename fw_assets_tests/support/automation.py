"""The decisions' declarative automation evaluated tick by tick in process, as the
`decide_in_crawl_order` sensor evaluates it in the daemon, over the instance a test materializes in."""

import time

import dagster as dg
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.utils import make_new_backfill_id

from fw_assets.automation.dump_runs import PARTITION_TAG
from fw_assets.definitions import defs
from fw_assets.jobs import signing_job
from fw_assets.lib.versions import DATA_VERSION_TAG
from fw_assets.partitions import KEPT_GROUP


class CrawlOrderTicks:
    """Each `tick()` is one evaluation of group `fineweb_edu_kept`'s automation conditions; it
    returns what it requests: asset name -> sorted dumps."""

    def __init__(self, instance: dg.DagsterInstance):
        self.instance = instance
        self.cursor = None

    def tick(self) -> dict[str, list[str]]:
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=self.instance, cursor=self.cursor, asset_selection=dg.AssetSelection.groups(KEPT_GROUP)
        )
        self.cursor = result.cursor
        requested = {key.to_user_string(): sorted(result.get_requested_partitions(key)) for key in _kept_keys()}
        return {name: dumps for name, dumps in requested.items() if dumps}


def _kept_keys() -> list[dg.AssetKey]:
    return sorted(dg.AssetSelection.groups(KEPT_GROUP).resolve(defs.resolve_asset_graph()))


def decided(*dumps: str) -> dict[str, list[str]]:
    """What a tick requests to decide and tokenize `dumps`."""
    return {"deduplicated": sorted(dumps), "tokenized": sorted(dumps)}


SIGNING = ("raw", "sampled", "bucketed", "minhash", "band_key_index")


def signed(instance: dg.DagsterInstance, dump: str, content_version: str = "v1") -> None:
    """Record a finished signing of `dump` (every asset of group `fineweb_edu`) whose band keys
    have `content_version`, as its run would (without running it: what the automation reads)."""
    for name in SIGNING:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(name, partition=dump, tags={DATA_VERSION_TAG: content_version})
        )


def decisions_made(instance: dg.DagsterInstance, dump: str) -> None:
    """Record `dump` decided and tokenized, as the run the automation requested would."""
    for name in ("deduplicated", "tokenized"):
        instance.report_runless_asset_event(dg.AssetMaterialization(name, partition=dump))


def queued_signing_run(instance: dg.DagsterInstance, dump: str) -> dg.DagsterRun:
    """A run of `dump_signing` for `dump`, queued as the daemon queues it: its planned
    materializations recorded, so Dagster counts them in progress."""
    origin = RemoteJobOrigin(
        RemoteRepositoryOrigin(
            InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="fw_assets.definitions")),
            "__repository__",
        ),
        signing_job.name,
    )
    return instance.create_run_for_job(
        defs.resolve_job_def(signing_job.name),
        tags={PARTITION_TAG: dump},
        status=dg.DagsterRunStatus.QUEUED,
        asset_selection=frozenset(dg.AssetKey(name) for name in SIGNING),
        remote_job_origin=origin,
    )


def open_signing_backfill(instance: dg.DagsterInstance, dumps: list[str]) -> str:
    """A UI backfill of group `fineweb_edu` over `dumps`, requested and not yet run (the daemon
    has launched none of its runs); returns its id."""
    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=make_new_backfill_id(),
        asset_graph=defs.resolve_asset_graph(),
        partition_names=dumps,
        asset_selection=[dg.AssetKey(name) for name in SIGNING],
        backfill_timestamp=time.time(),
        tags={},
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=None,
        description=None,
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill.backfill_id


def end_backfill(instance: dg.DagsterInstance, backfill_id: str) -> None:
    backfill = instance.get_backfill(backfill_id)
    instance.update_backfill(backfill.with_status(BulkActionStatus.COMPLETED_SUCCESS))
