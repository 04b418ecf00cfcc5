"""The `stale_dedup` sensor: re-decides a later dump when what its decisions read of an earlier
dump changed.

`deduplicated` of a dump reads the band keys and signatures of every earlier dump signed by then, and
its generation record names each of them among its inputs (an earlier dump not signed yet as not
published, with the content version of those signed: fw_assets.dedup.signature_files.content_version).
The sensor reads those records in the output folder, not the instance's history, with the one check
every reader makes (fw_assets.formats.lineage.generation_state: a dump whose records cannot be trusted
is skipped, named in the tick with the command that makes them again). Three rules:

1. By content: a dump's decisions are stale only when an input's published version is not the one
   recorded (an earlier dump re-signed with other content, or signed after them). An identical
   re-sign requests nothing. `minhash` records an observation of `band_key_index` with the same
   content version, so Dagster's UI shows the same dumps stale.
2. Never beside a dump's own run: a dump with a queued or in-progress run that decides it (UI,
   CLI, sensor, on any host), or a failed one about to be retried, is not requested; that run reads
   the current versions.
3. Never twice for the same inputs: the run key is the dump and the versions of everything the run
   will read, so whatever the sensor believes, the daemon launches one run per dump and inputs; a
   dump whose latest attempt to decide it failed with the inputs published now is not requested.

A dump published by `minhash` without its observation (the run was killed between the two) gets it
recorded from the dump's generation record. With a scope other than `across_dumps` no decision
reads an earlier dump: nothing is stale.
"""

import json

import dagster as dg
import xxhash

from fw_assets.automation.dump_runs import unfinished_runs
from fw_assets.automation.observations import latest_observations
from fw_assets.automation.output_folder import refused_folder
from fw_assets.automation.skipped_dumps import skipped_note
from fw_assets.dedup.band_key_index import band_key_index
from fw_assets.dedup.band_key_lineage import published, read_by_decisions
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.dedup.minhash_policy import MINHASH_POLICY, Scope
from fw_assets.formats.lineage import GenerationState, generation_state
from fw_assets.jobs import dump_chain_job
from fw_assets.lib.publish import data_version
from fw_assets.partitions import dump_partitions
from fw_assets.paths import publication_name
from fw_assets.resources import FineWebStorage
from fw_assets.run_health import fail_dead_runs
from fw_assets.tokenizing.tokenized import tokenized

MATERIALIZATION = dg.DagsterEventType.ASSET_MATERIALIZATION
PLANNED = dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED


def record_missing_observations(instance: dg.DagsterInstance, storage: FineWebStorage, log) -> None:
    """Record the observation of each dump whose published minhash holds another content version
    than its latest observation (its run was killed between publishing and observing)."""
    observed = latest_observations(instance, band_key_index.key)
    for dump in dump_partitions.get_partition_keys():
        record = generation_state(storage.output_root, publication_name("minhash", dump), dump, False).record
        version = record and record["contents"].get("content_version")
        if version and observed.get(dump) != version:
            instance.report_runless_asset_event(published(dump, version, record["generation"]))
            log(f"{dump}: its minhash was published without its band_key_index observation; recorded it")


def decision_inputs(root, dump: str) -> dict[str, GenerationState]:
    """What a re-decision of `dump` would read, by publication name: each record published now (its
    own inputs are not compared: the decisions read another dump's band keys by their content)."""
    read = {publication_name("minhash", d): d for d in read_by_decisions(dump, True)}
    return {name: generation_state(root, name, d, False)
            for name, d in {**read, publication_name("bucketed", dump): dump}.items()}


def stale_dumps(instance: dg.DagsterInstance, root) -> tuple[dict[str, str], dict[str, str]]:
    """Dump -> the run key of its re-decision, for every dump whose decisions are stale (module
    docstring) and that has no queued or in-progress run deciding it; and dump -> why it is skipped,
    for each whose decisions' record, or a record they would be decided from, cannot be trusted."""
    storage = instance.event_log_storage
    signed = storage.get_latest_storage_id_by_partition(minhash.key, MATERIALIZATION)
    decided = storage.get_latest_storage_id_by_partition(deduplicated.key, MATERIALIZATION)
    planned = storage.get_latest_storage_id_by_partition(deduplicated.key, PLANNED)
    busy = unfinished_runs(instance, deduplicated.key)
    stale, refused = {}, {}
    for dump in dump_partitions.get_partition_keys():
        if dump in busy:
            continue
        state = generation_state(root, publication_name("dedup", dump), dump)
        attempt = planned.get(dump, 0)
        failed = attempt > decided.get(dump, 0)  # its latest attempt published nothing
        if state.refusal:
            refused[dump] = state.refusal
            continue
        if (state.record is None and not failed) or (state.record and not state.changed):
            continue
        # it failed with the earlier dumps published now (its own is signed in the run deciding it,
        # whose planned event comes first): the same run would fail again
        if failed and attempt > max((i for d, i in signed.items() if d < dump), default=0):
            continue
        inputs = decision_inputs(root, dump)
        if refusal := next((s.refusal for s in inputs.values() if s.refusal), None):
            refused[dump] = refusal
            continue
        versions = {name: data_version(s.record) if s.record else None for name, s in inputs.items()}
        stale[dump] = f"{dump}@inputs-{xxhash.xxh3_64(json.dumps(versions, sort_keys=True).encode()).hexdigest()}"
    return stale, refused


@dg.sensor(
    name="stale_dedup",
    job=dump_chain_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Re-runs deduplicated and tokenized of each dump decided against other band keys "
    "of an earlier dump than those published now (their generation records' inputs; one run per "
    "dump and inputs), unless a run of that dump is queued or in progress.",
)
def stale_dedup(context: dg.SensorEvaluationContext, storage: FineWebStorage) -> dg.SensorResult:
    if refused := refused_folder(context, storage):
        return dg.SensorResult(skip_reason=refused)
    if MINHASH_POLICY.scope != Scope.ACROSS_DUMPS:
        return dg.SensorResult(skip_reason=f"Scope {MINHASH_POLICY.scope}: no decision reads an earlier dump.")
    # a dead run of this host would otherwise count as in progress for good
    fail_dead_runs(context.instance, context.log.warning)
    record_missing_observations(context.instance, storage, context.log.info)
    stale, refused = stale_dumps(context.instance, storage.output_root)
    for dump, refusal in refused.items():
        context.log.warning(f"{dump}: skipped, {refusal}")
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
        f"{skipped_note(refused)}"
    )
