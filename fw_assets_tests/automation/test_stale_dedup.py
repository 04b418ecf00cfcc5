"""The `stale_dedup` sensor on a real instance, one tick at a time, on three generated dumps: it
requests by content (an identical re-sign requests nothing, a dump signed late requests exactly the
later dumps, once), never beside a dump's own run, and records an observation a killed run missed.
What it requests is what Dagster itself computes as stale."""

from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.loader import LoadingContextForTest

from fw_assets.automation.stale_dedup import stale_dedup
from fw_assets.dedup.band_key_index import band_key_index
from fw_assets.dedup.band_key_lineage import published
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.definitions import defs
from fw_assets.jobs import probe_losses_job
from fw_assets.paths import generation_record_path, publication_name
from fw_assets.synthetic import write_sample_dumps
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.runs import materialize_dump, resources, run_waiting_for_its_retry, unfinished_run

FIRST, SECOND, THIRD = DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2013-48", "CC-MAIN-2014-10")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("reruns-source")
    write_sample_dumps(root, DUMPS, rows_per_dump=400, seed=7)
    return root


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def tick(instance: dg.DagsterInstance, source: Path, output: Path) -> dict[str, str]:
    """Dump -> run key of each run the sensor requests."""
    context = dg.build_sensor_context(
        instance=instance, definitions=defs, resources={"storage": resources(source, output)["storage"]}
    )
    requests = stale_dedup(context).run_requests or []
    assert all(set(r.asset_selection) == {deduplicated.key, tokenized.key} for r in requests)
    return {r.partition_key: r.run_key for r in requests}


def stale_in_dagster(instance: dg.DagsterInstance) -> set[str]:
    """The dumps whose decisions Dagster's own staleness (the UI's) shows stale."""
    resolver = CachingStaleStatusResolver(
        instance, defs.resolve_asset_graph(), LoadingContextForTest(instance)
    )
    return {d for d in DUMPS if resolver.get_status(deduplicated.key, d) == StaleStatus.STALE}


def latest_materialization(instance: dg.DagsterInstance, key: dg.AssetKey, dump: str):
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[dump]), limit=1
    ).records
    return records[0].asset_materialization if records else None


def observed_version(instance: dg.DagsterInstance, dump: str) -> str:
    record = instance.get_latest_data_version_record(band_key_index.key, True, dump)
    return record.asset_observation.tags["dagster/data_version"]


def test_an_identical_re_sign_of_an_earlier_dump_requests_nothing(instance, source, tmp_path):
    for dump in DUMPS:
        materialize_dump(source, tmp_path, dump, instance=instance)
    before = observed_version(instance, FIRST)
    materialize_dump(source, tmp_path, FIRST, instance=instance)  # a retry, a backfill
    assert observed_version(instance, FIRST) == before
    assert tick(instance, source, tmp_path) == {}
    assert stale_in_dagster(instance) == set()


def test_an_earlier_dump_signed_late_requests_exactly_the_later_dumps_once(instance, source, tmp_path):
    for dump in (SECOND, THIRD, FIRST):
        materialize_dump(source, tmp_path, dump, instance=instance)
    requested = tick(instance, source, tmp_path)
    assert set(requested) == {SECOND, THIRD}
    assert stale_in_dagster(instance) == {SECOND, THIRD}
    assert tick(instance, source, tmp_path) == requested  # same run keys: the daemon runs each once
    for dump in (SECOND, THIRD):
        materialize_dump(source, tmp_path, dump, assets=[deduplicated], instance=instance)
    assert tick(instance, source, tmp_path) == {}
    assert stale_in_dagster(instance) == set()


def test_the_decisions_record_the_earlier_versions_they_were_decided_against(instance, source, tmp_path):
    for dump in DUMPS:
        materialize_dump(source, tmp_path, dump, instance=instance)
    metadata = latest_materialization(instance, deduplicated.key, THIRD).metadata
    versions = {d: observed_version(instance, d) for d in (FIRST, SECOND)}
    assert metadata["decided_against"].value == versions
    assert all(f"`{v}`" in metadata["earlier_dumps"].value for v in versions.values())


@pytest.mark.parametrize("status", [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTED])
def test_a_dump_whose_own_run_is_queued_or_in_progress_is_not_requested(instance, source, tmp_path, status):
    for dump in (SECOND, THIRD, FIRST):
        materialize_dump(source, tmp_path, dump, instance=instance)
    unfinished_run(instance, SECOND, status)
    assert set(tick(instance, source, tmp_path)) == {THIRD}


def test_a_run_scoring_a_dumps_probe_losses_does_not_hold_its_re_decision_back(instance, source, tmp_path):
    """A `probe_losses` run of a dump decides nothing: its stale decisions are requested beside it."""
    for dump in (SECOND, THIRD, FIRST):
        materialize_dump(source, tmp_path, dump, instance=instance)
    unfinished_run(instance, SECOND, dg.DagsterRunStatus.STARTED, job=probe_losses_job.name)
    assert set(tick(instance, source, tmp_path)) == {SECOND, THIRD}


def test_a_dump_whose_failed_run_waits_for_its_retry_is_not_requested(instance, source, tmp_path):
    for dump in (SECOND, THIRD, FIRST):
        materialize_dump(source, tmp_path, dump, instance=instance)
    run_waiting_for_its_retry(instance, SECOND)
    assert set(tick(instance, source, tmp_path)) == {THIRD}


def test_a_minhash_published_without_its_observation_gets_it_and_the_later_dumps_re_decided(
    instance, source, tmp_path
):
    for dump in (SECOND, THIRD):
        materialize_dump(source, tmp_path, dump, instance=instance)
    with dg.DagsterInstance.ephemeral() as elsewhere:  # as if killed before its observation
        materialize_dump(source, tmp_path, FIRST, instance=elsewhere)
    assert instance.get_latest_data_version_record(band_key_index.key, True, FIRST) is None
    assert set(tick(instance, source, tmp_path)) == {SECOND, THIRD}
    assert observed_version(instance, FIRST)
    assert latest_materialization(instance, minhash.key, FIRST) is None


def test_the_output_folders_records_decide_not_an_instance_history_of_another_folder(instance, source, tmp_path):
    """The instance also holds an observation of FIRST made in another output folder (the demo's,
    say); in this folder FIRST was never signed, so the later dumps' decisions are current."""
    for dump in (SECOND, THIRD):
        materialize_dump(source, tmp_path, dump, instance=instance)
    instance.report_runless_asset_event(published(FIRST, "0123456789abcdef", "elsewhere0000"))
    assert tick(instance, source, tmp_path) == {}


def test_the_run_key_is_the_dump_and_the_inputs_it_will_read_whatever_the_history(instance, source, tmp_path):
    """Whatever a sensor believes, it never asks twice for a dump with the same inputs: the run key
    holds what the re-decision will read, so a second instance of this folder asks the same."""
    for dump in (SECOND, THIRD, FIRST):
        materialize_dump(source, tmp_path, dump, instance=instance)
    requested = tick(instance, source, tmp_path)
    assert set(requested) == {SECOND, THIRD}
    with dg.DagsterInstance.ephemeral() as fresh:
        assert tick(fresh, source, tmp_path) == requested
    materialize_dump(source, tmp_path, FIRST, assets=[minhash], instance=instance)  # the same content again
    assert tick(instance, source, tmp_path) == requested


def test_a_dump_whose_record_cannot_be_trusted_is_skipped_by_name_the_others_requested(instance, source, tmp_path):
    for dump in (SECOND, THIRD, FIRST):
        materialize_dump(source, tmp_path, dump, instance=instance)
    record = generation_record_path(tmp_path, publication_name("dedup", THIRD))
    record.write_bytes(record.read_bytes()[:200])
    assert set(tick(instance, source, tmp_path)) == {SECOND}
    materialize_dump(source, tmp_path, SECOND, assets=[deduplicated], instance=instance)
    context = dg.build_sensor_context(
        instance=instance, definitions=defs, resources={"storage": resources(source, tmp_path)["storage"]})
    result = stale_dedup(context)
    assert not result.run_requests
    for expected in (f"Skipped 1 dump(s) whose generation record cannot be trusted: Dump {THIRD}: the generation "
                     f"record {record} cannot be trusted", f"--select deduplicated --partition {THIRD}`"):
        assert expected in result.skip_reason.skip_message
