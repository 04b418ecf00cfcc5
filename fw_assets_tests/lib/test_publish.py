"""Publish by rename, all or nothing: after a failure or a kill -9 at any rename, the published tree
is exactly the previous generation or exactly the new one, and readers never see anything else."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import xxhash

from fw_assets.automation.dump_runs import PARTITION_TAG
from fw_assets.contracts.asset_checks import FORCE_TAG
from fw_assets.jobs import signing_job
from fw_assets.lib.generation_record import RecordRefused, sealed
from fw_assets.lib.publish import (
    JOURNAL,
    PublishedOutputChanged,
    PublishError,
    every_file,
    files_ending,
    published_generation,
    recorded_generation,
    recover_dump,
    staged_publication,
)
from fw_assets.paths import generation_record_path as record_path
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests.support.publish_generations import (
    CODE_VERSION,
    DUMP,
    NAME,
    NEW,
    OLD,
    folder_with,
    publish_generation,
)
from fw_assets_tests.support.runs import materialize_dump, subprocess_env
from fw_assets_tests.support.trees import published_tree


@pytest.fixture(scope="module")
def generations(tmp_path_factory) -> tuple[dict, dict, int]:
    """The published trees of the old and the new generation, and how many renames publishing
    the new one takes (journal, moves aside, moves into place, generation record)."""
    root = tmp_path_factory.mktemp("generations")
    publish_generation(root, "old", OLD)
    old = published_tree(root)
    renames = []
    real_rename = os.rename
    os.rename = lambda *a: (renames.append(a), real_rename(*a))  # noqa: E731 (counting only)
    try:
        publish_generation(root, "new", NEW)
    finally:
        os.rename = real_rename
    return old, published_tree(root), len(renames)


def without_record(tree: dict) -> dict:
    return {path: digest for path, digest in tree.items() if not path.startswith("published/")}


def is_generation(root: Path, tree: dict, label: str) -> bool:
    """The published tree is exactly `tree` (the files of that generation) and its record says `label`.
    Records differ between roots only in their generation id and time."""
    record = json.loads(record_path(root, NAME).read_text())
    return without_record(published_tree(root)) == without_record(tree) and record["contents"] == {
        "label": label
    }


def test_publish_replaces_whole_targets_removes_those_mapped_to_none_and_records_the_files(tmp_path):
    publish_generation(tmp_path, "old", OLD)
    publish_generation(tmp_path, "new", NEW)
    assert sorted(p.name for p in (tmp_path / "en/3.0" / DUMP).iterdir()) == [
        "part-0.parquet", "part-1.parquet", "part-2.parquet"
    ]
    assert not (tmp_path / "en/3.5" / DUMP).exists()
    record = json.loads(record_path(tmp_path, NAME).read_text())
    assert record["contents"] == {"label": "new"} and record["dump"] == DUMP
    assert set(record["files"]) == set(without_record(published_tree(tmp_path)))
    assert not list((tmp_path / ".staging").glob(f"{NAME}.*"))


def test_a_run_failing_before_publish_leaves_the_previous_output(tmp_path):
    publish_generation(tmp_path, "old", OLD)
    before = published_tree(tmp_path)
    with pytest.raises(RuntimeError), staged_publication(tmp_path, NAME, DUMP, code_version=CODE_VERSION) as staging:
        folder_with(staging.path / "a", {"half.parquet": "half"})
        raise RuntimeError("contract failed")
    assert published_tree(tmp_path) == before
    assert not list((tmp_path / ".staging").glob(f"{NAME}.*"))


def test_an_exception_at_any_rename_puts_back_every_rename_already_done(tmp_path, generations):
    old, new, renames = generations
    real_rename = os.rename
    for failing in range(renames):
        root = tmp_path / str(failing)
        publish_generation(root, "old", OLD)
        calls = []

        def rename_failing_once(src, dst, failing=failing):
            calls.append(src)
            if len(calls) == failing + 1:
                raise PermissionError(13, "Permission denied", str(src), None, str(dst))
            real_rename(src, dst)

        os.rename = rename_failing_once
        try:
            with pytest.raises((PublishError, PermissionError)) as raised:
                publish_generation(root, "new", NEW)
        finally:
            os.rename = real_rename
        assert is_generation(root, old, "old"), f"a failure at rename {failing} mixed generations"
        assert not list((root / ".staging").glob(f"*/{JOURNAL}")), "nothing is left to recover"
        if isinstance(raised.value, PublishError):  # failed while moving, not writing the journal
            assert "previous output is published unchanged" in str(raised.value)
            assert str(calls[failing]) in str(raised.value), "the message names the path"


OTHER_DUMP = "CC-MAIN-2013-48"


# A child process publishes the new generation and SIGKILLs itself right after rename k.
KILLED_PUBLISHER = """
import sys
from pathlib import Path
from fw_assets_tests.support.killing import die_after_rename
from fw_assets_tests.support.publish_generations import NEW, publish_generation
after = int(sys.argv[2])
die_after_rename(lambda done, source, destination: done == after + 1)
publish_generation(Path(sys.argv[1]), "new", NEW)
"""


def kill_publisher_after_rename(root: Path, rename: int) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", KILLED_PUBLISHER, str(root), str(rename)], env=env)
    assert child.returncode == -signal.SIGKILL, "the publisher was killed mid-publish"


@pytest.mark.e2e
def test_a_kill_at_any_rename_is_rolled_back_by_the_next_reader(tmp_path, generations):
    old, new, renames = generations
    for rename in range(renames):
        root = tmp_path / str(rename)
        publish_generation(root, "old", OLD)
        kill_publisher_after_rename(root, rename)
        with published_generation(root, NAME, DUMP) as record:
            assert record["contents"] == {"label": "old"}
            assert is_generation(root, old, "old"), f"killed after rename {rename}: not the old tree"
        assert not list((root / ".staging").glob(f"*/{JOURNAL}"))
        publish_generation(root, "new", NEW)  # and the next writer publishes whole
        assert is_generation(root, new, "new")


@pytest.mark.e2e
def test_a_kill_mid_publish_is_rolled_back_by_the_next_run_of_another_output_of_the_dump(
    tmp_path, generations
):
    old, _, renames = generations
    publish_generation(tmp_path, "old", OLD)
    kill_publisher_after_rename(tmp_path, renames // 2)
    assert without_record(published_tree(tmp_path)) != without_record(old), "precondition: mixed"
    with staged_publication(tmp_path, f"tokenized-x-{DUMP}", DUMP, code_version=CODE_VERSION):
        assert is_generation(tmp_path, old, "old")
    assert recover_dump(tmp_path, DUMP) == []


def test_recover_leaves_other_dumps_publications_alone(tmp_path):
    other = tmp_path / "other"
    publish_generation(other, "old", OLD)
    journal = {"name": NAME, "dump": DUMP, "moves": []}
    staged = other / ".staging" / f"{NAME}.0123456789ab"
    folder_with(staged, {JOURNAL: json.dumps(journal)})
    assert recover_dump(other, "CC-MAIN-2013-48") == []
    assert (staged / JOURNAL).exists()
    assert recover_dump(other, DUMP) == [NAME]


def test_a_reader_waits_for_a_publication_in_progress_and_sees_only_the_new_generation(
    tmp_path, generations
):
    _, new, _ = generations
    publish_generation(tmp_path, "old", OLD)
    real_rename, started = os.rename, threading.Event()

    def slow_rename(src, dst):
        if ".staging" not in Path(dst).parts:  # moving into the published tree
            started.set()
        time.sleep(0.05)
        real_rename(src, dst)

    os.rename = slow_rename
    try:
        writer = threading.Thread(target=publish_generation, args=(tmp_path, "new", NEW))
        writer.start()
        assert started.wait(120), "the writer reached the published tree"
        with published_generation(tmp_path, NAME, DUMP) as record:
            assert record["contents"] == {"label": "new"}
            assert is_generation(tmp_path, new, "new")
        writer.join()
    finally:
        os.rename = real_rename


def test_a_reader_refuses_a_published_file_changed_outside_the_pipeline(tmp_path):
    publish_generation(tmp_path, "old", OLD)
    (tmp_path / "en/2.8" / DUMP / "part-1.parquet").unlink()
    with pytest.raises(PublishedOutputChanged, match=f"en/2.8/{DUMP}/part-1.parquet is missing"):
        with published_generation(tmp_path, NAME, DUMP):
            pass


def test_the_record_holds_each_files_size_and_checksum_and_the_code_that_published_it(tmp_path):
    publish_generation(tmp_path, "old", OLD)
    record = recorded_generation(tmp_path, NAME)
    assert record["code_version"] == CODE_VERSION and record["format"] == 2
    for relative, entry in record["files"].items():
        data = (tmp_path / relative).read_bytes()
        assert entry == {"size": len(data), "xxh3_128": xxhash.xxh3_128_hexdigest(data)}, relative


def test_a_reader_refuses_a_flipped_bit_in_a_file_it_reads_whole_naming_the_file(tmp_path):
    publish_generation(tmp_path, "old", OLD)
    damaged = tmp_path / "en/2.8" / DUMP / "part-1.parquet"
    data = bytearray(damaged.read_bytes())
    data[3] ^= 0x10  # same size: no size check sees it
    damaged.write_bytes(bytes(data))
    with published_generation(tmp_path, NAME, DUMP, verified=files_ending(".json")) as record:
        assert record is not None  # a reader that does not read it whole: its checksum is not read
    with pytest.raises(PublishedOutputChanged, match=f"en/2.8/{DUMP}/part-1.parquet has other bytes than were "
                       r"published \(xxh3_128 differs\)"):
        with published_generation(tmp_path, NAME, DUMP, verified=every_file):
            pass


def test_a_truncated_record_is_refused_naming_its_file(tmp_path):
    publish_generation(tmp_path, "old", OLD)
    path = record_path(tmp_path, NAME)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(RecordRefused, match=f"{path}: not a generation record: it is not JSON"):
        with published_generation(tmp_path, NAME, DUMP):
            pass


def test_a_record_linked_to_another_dumps_record_is_refused(tmp_path):
    publish_generation(tmp_path, "old", OLD)
    other = f"bucketed-{OTHER_DUMP}"  # another dump's record, whole and sealed
    record = {**json.loads(record_path(tmp_path, NAME).read_text()), "name": other, "dump": OTHER_DUMP}
    record_path(tmp_path, other).write_text(json.dumps(sealed(record)))
    record_path(tmp_path, NAME).unlink()
    record_path(tmp_path, NAME).symlink_to(record_path(tmp_path, other))
    with pytest.raises(RecordRefused, match="a link to"):
        recorded_generation(tmp_path, NAME)
    record_path(tmp_path, NAME).unlink()
    shutil.copyfile(record_path(tmp_path, other), record_path(tmp_path, NAME))  # a copy, not a link
    with pytest.raises(RecordRefused, match=f"it is the record of '{other}', not of '{NAME}'"):
        recorded_generation(tmp_path, NAME)


def test_a_never_published_output_reads_as_none(tmp_path):
    with published_generation(tmp_path, NAME, DUMP) as record:
        assert record is None


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.e2e
def test_killing_a_run_while_it_writes_keeps_the_previous_output(tmp_path, dagster_home):
    dump = "CC-MAIN-2014-10"
    source, output = tmp_path / "source", tmp_path / "out"
    write_sample_dump(source, dump, rows=30_000, files=3, seed=11)
    materialize_dump(source, output, dump)
    before = published_tree(output)
    assert any(path.startswith("en/") for path in before)

    run = subprocess.Popen(
        [sys.executable, "-m", "dagster", "job", "execute", "-m", "fw_assets.definitions", "-j", signing_job.name,
         "-o", "bucketed", "--tags", json.dumps({PARTITION_TAG: dump, FORCE_TAG: "true"})],  # unchanged: forced
        env=subprocess_env(source, output, dagster_home),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        _wait_for(lambda: list((output / ".staging").glob(f"bucketed-{dump}.*/out/bucket=*/*.parquet")),
                  timeout=120, what="the run to start writing parquet into staging")
        assert run.poll() is None, "the run finished before it could be killed; use a larger dump"
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()

    assert published_tree(output) == before
    materialize_dump(source, output, dump)  # the next run cleans up and publishes again
    assert not list((output / ".staging").glob(f"bucketed-{dump}.*"))
    assert set(published_tree(output)) == set(before)
