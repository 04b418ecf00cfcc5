"""The `stale_dedup` sensor: re-decides a later dump when what its decisions read of an earlier
dump changed.

`deduplicated` of a dump reads the band keys and signatures of every earlier dump signed by then.
When `minhash` publishes a dump it records an observation of `band_key_index` whose data version is
the content version of those files (fw_assets.dedup.signature_files.content_version), and each
decision records the content version of every earlier dump it was decided against (metadata
`decided_against`). Three rules:

1. By content: a dump's decisions are stale only when an earlier dump's latest version is not the
   one they were decided against (it changed, or it was signed after them). An identical re-sign
   requests nothing. Dagster's UI compares the same data versions, so it shows the same dumps
   stale; the sensor computes it from the recorded versions, so also from the 101st dump on, where
   Dagster 1.13 stops computing staleness.
2. Never beside a dump's own run: a dump with a queued or in-progress run that decides it (UI,
   CLI, sensor, on any host), or a failed one about to be retried, is not requested; that run reads
   the current versions.
3. Once per state: the run key holds the versions the run will decide against.

A dump whose latest decisions failed (an earlier dump's file was damaged, say) is requested again
once an earlier dump is signed after that failure. A dump published by `minhash` without its
observation (the run was killed between the two) gets it recorded first, from the dump's generation
record. With a scope other than `across_dumps` no decision reads an earlier dump: nothing is stale.
"""

import json

import dagster as dg
import xxhash

from fw_assets.automation.dump_runs import unfinished_runs
from fw_assets.automation.observations import latest_observations
from fw_assets.dedup.band_key_index import band_key_index
from fw_assets.dedup.band_key_lineage import DECIDED_AGAINST, published
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.dedup.minhash_policy import MINHASH_POLICY, Scope
from fw_assets.jobs import dump_chain_job
from fw_assets.paths import publication_name
from fw_assets.lib.publish import PublishedOutputChanged, published_generation
from fw_assets.partitions import dump_partitions
from fw_assets.resources import FineWebStorage
from fw_assets.run_health import fail_dead_runs
from fw_assets.tokenizing.tokenized import tokenized

MATERIALIZATION = dg.DagsterEventType.ASSET_MATERIALIZATION
PLANNED = dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED


def observed_versions(instance: dg.DagsterInstance) -> dict[str, str]:
    """Dump -> the data version of its latest `band_key_index` observation."""
    return latest_observations(instance, band_key_index.key)


def record_missing_observations(
    instance: dg.DagsterInstance, storage: FineWebStorage, log
) -> dict[str, str]:
    """Record the observation of each dump whose published minhash holds another content version
    than its latest observation (its run was killed between publishing and observing); returns
    the observations then."""
    observed = observed_versions(instance)
    missing = []
    for dump in dump_partitions.get_partition_keys():
        try:
            with published_generation(storage.output_root, publication_name("minhash", dump), dump) as record:
                version = record and record["contents"].get("content_version")
        except PublishedOutputChanged as error:
            log(f"{dump}: {error}")
            continue
        if version and (dump not in observed or observed[dump] != version):
            instance.report_runless_asset_event(published(dump, version, record["generation"]))
            missing.append(dump)
    for dump in missing:
        log(f"{dump}: its minhash was published without its band_key_index observation; recorded it")
    return observed_versions(instance) if missing else observed


def decided_against(instance: dg.DagsterInstance, storage_ids: list[int]) -> dict[str, dict[str, str]]:
    """Dump -> the earlier dumps' versions its latest decisions were decided against."""
    if not storage_ids:
        return {}
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=deduplicated.key, storage_ids=storage_ids), limit=len(storage_ids)
    ).records
    against = {}
    for record in records:
        entry = record.asset_materialization.metadata.get(DECIDED_AGAINST)
        against[record.partition_key] = entry.value if entry else {}  # decided before versions were
    return against


def stale_dumps(instance: dg.DagsterInstance, observed: dict[str, str]) -> dict[str, str]:
    """Dump -> the run key of its re-decision, for every dump whose decisions are stale (module
    docstring) and that has no queued or in-progress run deciding it."""
    storage = instance.event_log_storage
    signed = storage.get_latest_storage_id_by_partition(minhash.key, MATERIALIZATION)
    decided = storage.get_latest_storage_id_by_partition(deduplicated.key, MATERIALIZATION)
    planned = storage.get_latest_storage_id_by_partition(deduplicated.key, PLANNED)
    against = decided_against(instance, list(decided.values()))
    busy = unfinished_runs(instance, deduplicated.key)
    stale = {}
    for dump in sorted((set(signed) | set(decided)) - set(busy)):
        versions = {d: v for d, v in observed.items() if d < dump}
        if signed.get(dump, 0) > decided.get(dump, 0):  # signed since its decisions, no run: failed
            attempt = planned.get(dump, 0)
            newest = max((i for d, i in signed.items() if d < dump), default=0)
            if newest > attempt > decided.get(dump, 0):
                stale[dump] = f"{dump}@attempt{attempt}-signed{newest}"
        elif dump in decided and any(against[dump].get(d) != v for d, v in versions.items()):
            state = xxhash.xxh3_64(json.dumps(versions, sort_keys=True).encode()).hexdigest()
            stale[dump] = f"{dump}@dedup{decided[dump]}-against{state}"
    return stale


@dg.sensor(
    name="stale_dedup",
    job=dump_chain_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Re-runs deduplicated and tokenized of each dump decided against other band keys "
    "of an earlier dump than its latest (band_key_index data versions; one run per dump and state), "
    "unless a run of that dump is queued or in progress.",
)
def stale_dedup(context: dg.SensorEvaluationContext, storage: FineWebStorage) -> dg.SensorResult:
    if MINHASH_POLICY.scope != Scope.ACROSS_DUMPS:
        return dg.SensorResult(skip_reason=f"Scope {MINHASH_POLICY.scope}: no decision reads an earlier dump.")
    # a dead run of this host would otherwise count as in progress for good
    fail_dead_runs(context.instance, context.log.warning)
    observed = record_missing_observations(context.instance, storage, context.log.info)
    stale = stale_dumps(context.instance, observed)
    for dump in stale:
        context.log.info(f"{dump}: decided against other band keys of an earlier dump; re-deciding it")
    if stale:
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(run_key=key, partition_key=dump, asset_selection=[deduplicated.key, tokenized.key])
                for dump, key in stale.items()
            ]
        )
    return dg.SensorResult(
        skip_reason="Every dump was decided against its earlier dumps' latest band keys, or has a run under way."
    )
