"""The `stale_dedup` sensor: re-decides the later dumps after an earlier dump's `minhash` changes.

`deduplicated` of a dump reads the minhash files of every earlier dump, so an earlier dump
materialized late (downloaded after its successors, or re-signed) leaves the later dumps'
decisions stale: they were made without it. Each tick compares, per dump, the newest
materialization of any strictly earlier dump's `minhash` with the dump's own `deduplicated`
(event-log storage ids, which only grow) and requests `deduplicated` + `tokenized` of every dump
it finds behind, one run each. The run key holds both ids, so a tick never asks twice for the
same state. A dump whose own `minhash` is newer than its decisions is mid-chain (or failed):
its own run handles it.
"""

import dagster as dg

from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.jobs import dump_chain_job
from fw_assets.tokenizing.tokenized import tokenized

MATERIALIZATION = dg.DagsterEventType.ASSET_MATERIALIZATION


def stale_dumps(instance: dg.DagsterInstance) -> dict[str, tuple[int, int]]:
    """Dump -> (storage id of its decisions, of the newest earlier minhash) for every dump whose
    decisions are older than some earlier dump's minhash."""
    storage = instance.event_log_storage
    signed = storage.get_latest_storage_id_by_partition(minhash.key, MATERIALIZATION)
    decided = storage.get_latest_storage_id_by_partition(deduplicated.key, MATERIALIZATION)
    stale, newest_earlier = {}, 0
    for dump in sorted(set(signed) | set(decided)):
        if dump in decided and newest_earlier > decided[dump] and signed.get(dump, 0) < decided[dump]:
            stale[dump] = (decided[dump], newest_earlier)
        newest_earlier = max(newest_earlier, signed.get(dump, 0))
    return stale


@dg.sensor(
    name="stale_dedup",
    job=dump_chain_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Re-runs deduplicated and tokenized of each dump whose decisions predate an "
    "earlier dump's latest minhash (one run per dump).",
)
def stale_dedup(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    stale = stale_dumps(context.instance)
    requests = [
        dg.RunRequest(
            run_key=f"{dump}@dedup{decided}-minhash{newest}",
            partition_key=dump,
            asset_selection=[deduplicated.key, tokenized.key],
        )
        for dump, (decided, newest) in stale.items()
    ]
    for dump in stale:
        context.log.info(f"{dump}: its decisions predate an earlier dump's minhash; re-deciding it")
    if requests:
        return dg.SensorResult(run_requests=requests)
    return dg.SensorResult(skip_reason="Every dump's decisions are newer than its earlier dumps' minhash.")
