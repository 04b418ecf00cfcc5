"""The new_dumps sensor on real folders and a real instance, one tick at a time."""

import os
import shutil
import time
from pathlib import Path

import dagster as dg
import pytest

from fw_assets import settings
from fw_assets.automation.new_dumps import FINGERPRINT_TAG, new_dumps
from fw_assets.definitions import defs
from fw_assets.jobs import signing_job
from fw_assets.resources import FineWebStorage
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests.support import bad_inputs as bad
from fw_assets_tests.support.runs import resources, run_waiting_for_its_retry, unfinished_run

DUMP = "CC-MAIN-2013-20"
OTHER_DUMP = "CC-MAIN-2013-48"
UNLOADED_DUMP = "CC-MAIN-2031-05"  # shaped like a dump, but not a partition of the loaded location
HOUR_AGO = time.time() - 3600


@pytest.fixture
def source(tmp_path) -> Path:
    (tmp_path / "data").mkdir()
    return tmp_path


def tick(instance, source: Path, cursor: str | None = None) -> dg.SensorResult:
    context = dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        definitions=defs,
        resources={"storage": FineWebStorage(source_dir=str(source), output_dir=str(source / "out"))},
    )
    return new_dumps(context)


def requested_dumps(result: dg.SensorResult) -> list[str]:
    return [request.partition_key for request in result.run_requests or []]


def write_dump(source: Path, dump: str = DUMP, files: int = 2, seed: int = 0) -> list[Path]:
    return write_sample_dump(source, dump, rows=300, files=files, seed=seed)


def sign(instance: dg.DagsterInstance, source: Path, output: Path) -> None:
    """Materialize DUMP's signing (what the sensor requests, and reads back as processed), with the
    code location's resources pointed at these folders."""
    dg.materialize(defs.assets, selection=signing_job.selection, partition_key=DUMP,
                   resources={**defs.resources, **resources(source, output)}, instance=instance)


def age(folder: Path) -> None:
    """Make a folder and its files look untouched for an hour."""
    for path in [*folder.iterdir(), folder]:
        os.utime(path, (HOUR_AGO, HOUR_AGO))


def test_a_complete_dump_is_requested_once_and_again_when_a_file_changes(instance, source):
    write_dump(source)
    first = tick(instance, source)
    assert requested_dumps(first) == [DUMP]
    request = first.run_requests[0]
    fingerprint = request.tags[FINGERPRINT_TAG]
    assert fingerprint in request.run_key and DUMP in request.run_key
    assert request.job_name in (None, "dump_signing")

    second = tick(instance, source, first.cursor)
    assert requested_dumps(second) == []
    assert "unchanged" in second.skip_reason.skip_message

    write_dump(source, seed=1)  # the same names with new contents, as a re-download would leave
    third = tick(instance, source, second.cursor)
    assert requested_dumps(third) == [DUMP]
    assert third.run_requests[0].tags[FINGERPRINT_TAG] != fingerprint
    assert third.run_requests[0].run_key != request.run_key


def test_an_incomplete_shard_set_waits_and_names_the_missing_file(instance, source):
    paths = write_dump(source, files=3)
    paths[1].unlink()
    waiting = tick(instance, source)
    assert requested_dumps(waiting) == []
    assert f"{DUMP}: 1 of 3 shards missing (train-00001-of-00003.parquet)" in waiting.skip_reason.skip_message

    write_dump(source, files=3)
    assert requested_dumps(tick(instance, source, waiting.cursor)) == [DUMP]


def test_a_file_still_being_written_holds_the_dump_back(instance, source):
    write_dump(source)
    partial = source / "data" / DUMP / ".train-00001-of-00002.parquet.4242.tmp"
    partial.write_bytes(b"PAR1 half a file")
    waiting = tick(instance, source)
    assert requested_dumps(waiting) == []
    assert "still being written (.train-00001-of-00002.parquet.4242.tmp)" in waiting.skip_reason.skip_message

    partial.unlink()
    assert requested_dumps(tick(instance, source, waiting.cursor)) == [DUMP]


def test_a_file_copied_in_place_is_not_taken_before_its_footer_lands(instance, source):
    paths = write_dump(source)
    complete = paths[1].read_bytes()
    paths[1].write_bytes(complete[: len(complete) // 2])
    waiting = tick(instance, source)
    assert requested_dumps(waiting) == []
    assert "without a parquet footer yet (train-00001-of-00002.parquet)" in waiting.skip_reason.skip_message

    paths[1].write_bytes(complete)
    assert requested_dumps(tick(instance, source, waiting.cursor)) == [DUMP]


def test_other_file_names_are_taken_once_nothing_changed_for_the_settle_period(
    instance, source, monkeypatch
):
    monkeypatch.setenv(settings.SENSOR_SETTLE_ENV, "600")
    folder = source / "data" / DUMP
    for path in write_dump(source):
        path.rename(folder / path.name.replace("train-", "part-"))
    fresh = tick(instance, source)
    assert requested_dumps(fresh) == []
    assert "nothing changed for 600s" in fresh.skip_reason.skip_message

    age(folder)
    settled = tick(instance, source, fresh.cursor)
    assert requested_dumps(settled) == [DUMP]


def test_folders_that_are_not_dumps_are_ignored(instance, source):
    (source / "data" / "README.md").write_text("not a dump")
    (source / "data" / "scratch").mkdir()
    write_dump(source, dump=OTHER_DUMP)
    result = tick(instance, source)
    assert requested_dumps(result) == [OTHER_DUMP]


def test_a_dump_folder_unknown_to_the_loaded_location_asks_for_a_reload(instance, source):
    write_dump(source, dump=UNLOADED_DUMP)
    result = tick(instance, source)
    assert requested_dumps(result) == []
    assert f"{UNLOADED_DUMP}: not a partition of the loaded code location" in result.skip_reason.skip_message
    assert "reload the code location 'fw_assets'" in result.skip_reason.skip_message


def test_an_empty_source_root_says_where_it_looked(instance, tmp_path):
    result = tick(instance, tmp_path / "nowhere")
    assert requested_dumps(result) == []
    assert str(tmp_path / "nowhere" / "data") in result.skip_reason.skip_message


def test_a_dump_already_materialized_from_the_same_files_is_not_requested(instance, source, tmp_path):
    write_dump(source)
    sign(instance, source, tmp_path / "out")
    result = tick(instance, source)
    assert requested_dumps(result) == []
    assert "1 dump(s) unchanged" in result.skip_reason.skip_message

    shutil.rmtree(source / "data" / DUMP)
    write_dump(source, seed=3)  # new files: processed again
    assert requested_dumps(tick(instance, source, result.cursor)) == [DUMP]


def test_a_dump_the_cli_processed_while_the_sensor_waited_is_not_requested_again(instance, source, tmp_path):
    """Requested once; then downloaded again and run from the CLI: the sensor waits for that run,
    then finds the dump materialized from exactly its new files and launches no second chain."""
    write_dump(source)
    first = tick(instance, source)
    assert requested_dumps(first) == [DUMP]
    shutil.rmtree(source / "data" / DUMP)
    write_dump(source, seed=3)
    cli_run = unfinished_run(instance, DUMP, dg.DagsterRunStatus.STARTED)
    waiting = tick(instance, source, first.cursor)
    assert requested_dumps(waiting) == []
    sign(instance, source, tmp_path / "out")  # what that CLI run did, from the new files
    instance.delete_run(cli_run)  # ended
    after = tick(instance, source, waiting.cursor)
    assert requested_dumps(after) == []
    assert "1 dump(s) unchanged" in after.skip_reason.skip_message


@pytest.mark.parametrize(
    "status", [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
)
def test_a_dump_whose_run_is_queued_or_in_progress_waits_for_it(instance, source, status):
    write_dump(source)
    run_id = unfinished_run(instance, DUMP, status)  # a UI backfill's, or the CLI's
    result = tick(instance, source)
    assert requested_dumps(result) == []
    assert f"run {run_id} of this dump is queued or in progress" in result.skip_reason.skip_message
    instance.report_run_failed(instance.get_run_by_id(run_id))
    assert requested_dumps(tick(instance, source, result.cursor)) == [DUMP]


def test_a_dump_whose_failed_run_waits_for_its_retry_waits_for_the_retry(instance, source):
    """A run whose host was lost is failed, then launched again by run retries: in between, the
    dump is no more free than while its run was on the lost host."""
    write_dump(source)
    run_id = run_waiting_for_its_retry(instance, DUMP)
    result = tick(instance, source)
    assert requested_dumps(result) == []
    assert f"run {run_id} of this dump failed and is about to be retried" in result.skip_reason.skip_message
    retry_id = unfinished_run(instance, DUMP, dg.DagsterRunStatus.QUEUED)  # the daemon launched it
    instance.add_run_tags(run_id, {"dagster/auto_retry_run_id": retry_id})
    result = tick(instance, source, result.cursor)
    assert f"run {retry_id} of this dump is queued or in progress" in result.skip_reason.skip_message


def test_the_interval_comes_from_the_environment(monkeypatch):
    assert new_dumps.minimum_interval_seconds == settings.sensor_interval_seconds()
    monkeypatch.setenv(settings.SENSOR_INTERVAL_ENV, "45")
    assert settings.sensor_interval_seconds() == 45
    monkeypatch.setenv(settings.SENSOR_INTERVAL_ENV, "five minutes")
    with pytest.raises(ValueError, match="FW_SENSOR_INTERVAL_SECONDS='five minutes'"):
        settings.sensor_interval_seconds()


def test_the_sensor_is_on_by_default_and_signs_dumps():
    sensor = defs.resolve_sensor_def("new_dumps")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.job_name == "dump_signing"


def test_two_complete_dumps_are_two_runs_each_signing_one(instance, source):
    write_dump(source, DUMP)
    write_dump(source, OTHER_DUMP)
    result = tick(instance, source)
    assert sorted(requested_dumps(result)) == [DUMP, OTHER_DUMP]
    job = defs.resolve_job_def("dump_signing")
    assert job.partitions_def == defs.resolve_assets_def("raw").partitions_def
    # every per-dump asset up to the band keys later dumps read; the decisions and token files
    # follow by automation, the optional probe on demand, and nothing partitioned otherwise (the
    # mixtures are per recipe)
    assert set(job.asset_layer.executable_asset_keys) == {
        dg.AssetKey(name) for name in ("raw", "sampled", "bucketed", "minhash", "band_key_index")
    }
    graph = defs.resolve_asset_graph()
    for key in ("deduplicated", "tokenized"):
        assert graph.get(dg.AssetKey(key)).automation_condition is not None


def test_an_appledouble_file_does_not_hold_a_dump_back(instance, source):
    (first, _) = write_dump(source)
    bad.apple_double_beside(first)
    assert requested_dumps(tick(instance, source)) == [DUMP]


def test_a_link_to_a_missing_blob_holds_the_dump_back_and_is_named(instance, source):
    (_, second) = write_dump(source)
    bad.dangle(second)
    waiting = tick(instance, source)
    assert requested_dumps(waiting) == []
    assert f"{second.name} (a link to a missing file)" in waiting.skip_reason.skip_message


@pytest.mark.parametrize("how", ["folder removed", "files removed"])
def test_a_dump_whose_source_is_deleted_after_its_run_is_named_and_never_requested_again(instance, source, how):
    write_dump(source)
    write_dump(source, OTHER_DUMP)
    first = tick(instance, source)
    assert sorted(requested_dumps(first)) == [DUMP, OTHER_DUMP]
    folder = source / "data" / DUMP
    if how == "folder removed":
        shutil.rmtree(folder)
    else:
        for path in folder.glob("*.parquet"):
            path.unlink()
    for cursor in (first.cursor, tick(instance, source, first.cursor).cursor):
        later = tick(instance, source, cursor)
        assert requested_dumps(later) == []
        message = later.skip_reason.skip_message
        assert f"1 dump(s) with their source files deleted since their run was requested ({DUMP})" in message
        assert "published outputs stay" in message and "Waiting" not in message
