"""The `stale_dedup` sensor: re-decides the later dumps after an earlier dump's band keys change.

`deduplicated` of a dump reads the band keys of every earlier dump, so an earlier dump signed late
(downloaded after its successors, or re-signed) leaves the later dumps' decisions stale: they were
made without it. `minhash` records an observation of `band_key_index` when it publishes a dump, and
Dagster records on each decision the newest `band_key_index` observation when its step began. Each
tick requests `deduplicated` + `tokenized`, one run each, of every dump whose decisions began before
some strictly earlier dump's newest observation: what Dagster shows as stale, and also from the
101st dump on, where Dagster 1.13 stops computing it. A dump whose latest decisions failed (an
earlier dump's file was damaged or from another policy, say) is requested again once an earlier
dump is signed after that failure. The run key holds both ids, so a tick never asks twice for the
same state. A dump whose own `minhash` is newer than its decisions and that has not failed since is
mid-chain: its own run handles it. With a scope other than `across_dumps` no decision reads an
earlier dump, so nothing gets stale.
"""

import dagster as dg

from fw_assets.dedup.band_key_index import band_key_index
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.dedup.policy import MINHASH_POLICY, Scope
from fw_assets.jobs import dump_chain_job
from fw_assets.tokenizing.tokenized import tokenized

MATERIALIZATION = dg.DagsterEventType.ASSET_MATERIALIZATION
OBSERVATION = dg.DagsterEventType.ASSET_OBSERVATION
PLANNED = dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED


def stale_dumps(instance: dg.DagsterInstance) -> dict[str, tuple[int, int]]:
    """Dump -> (storage id of its latest decisions, or of its failed attempt, and of the newest
    earlier band_key_index observation) for every dump whose decisions began, or whose last attempt
    was planned, before some earlier dump's newest observation."""
    storage = instance.event_log_storage
    signed = storage.get_latest_storage_id_by_partition(minhash.key, MATERIALIZATION)
    observed = storage.get_latest_storage_id_by_partition(band_key_index.key, OBSERVATION)
    decided = storage.get_latest_storage_id_by_partition(deduplicated.key, MATERIALIZATION)
    planned = storage.get_latest_storage_id_by_partition(deduplicated.key, PLANNED)
    seen = _index_seen_by_decisions(instance, list(decided.values()))
    stale, newest_earlier = {}, 0
    for dump in sorted(set(observed) | set(decided)):
        if signed.get(dump, 0) > decided.get(dump, 0):  # signed since its decisions: mid-chain or failed
            attempt = planned.get(dump, 0)
            if newest_earlier > attempt > decided.get(dump, 0) and _attempt_over(instance, dump):
                stale[dump] = (attempt, newest_earlier)
        elif dump in decided and newest_earlier > seen[dump]:
            stale[dump] = (decided[dump], newest_earlier)
        newest_earlier = max(newest_earlier, observed.get(dump, 0))
    return stale


def _attempt_over(instance: dg.DagsterInstance, dump: str) -> bool:
    """Whether the run that last planned the dump's decisions has ended (so they failed), rather
    than being queued or under way."""
    planned = instance.event_log_storage.get_latest_planned_materialization_info(deduplicated.key, dump)
    run = instance.get_run_by_id(planned.run_id) if planned else None
    return run is None or run.is_finished


def _index_seen_by_decisions(instance: dg.DagsterInstance, storage_ids: list[int]) -> dict[str, int]:
    """Dump -> the newest band_key_index observation when its decisions' step began, as Dagster
    recorded it in their provenance (0: none, or decided before the index existed)."""
    if not storage_ids:
        return {}
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=deduplicated.key, storage_ids=storage_ids), limit=len(storage_ids)
    ).records
    seen = {}
    for record in records:
        provenance = dg.DataProvenance.from_tags(record.asset_materialization.tags or {})
        pointer = provenance.input_storage_ids.get(band_key_index.key) if provenance else None
        seen[record.partition_key] = pointer or 0
    return seen


@dg.sensor(
    name="stale_dedup",
    job=dump_chain_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Re-runs deduplicated and tokenized of each dump whose decisions predate an "
    "earlier dump's latest band keys (band_key_index; one run per dump).",
)
def stale_dedup(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    if MINHASH_POLICY.scope != Scope.ACROSS_DUMPS:
        return dg.SensorResult(skip_reason=f"Scope {MINHASH_POLICY.scope}: no decision reads an earlier dump.")
    stale = stale_dumps(context.instance)
    requests = [
        dg.RunRequest(
            run_key=f"{dump}@dedup{attempt}-index{newest}",
            partition_key=dump,
            asset_selection=[deduplicated.key, tokenized.key],
        )
        for dump, (attempt, newest) in stale.items()
    ]
    for dump in stale:
        context.log.info(f"{dump}: its decisions predate an earlier dump's band keys; re-deciding it")
    if requests:
        return dg.SensorResult(run_requests=requests)
    return dg.SensorResult(skip_reason="Every dump's decisions are newer than its earlier dumps' band keys.")
