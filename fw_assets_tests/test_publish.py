"""Publish by rename: a killed run never costs the previous output, and never shows half a new one."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fw_assets.lib.publish import JOURNAL, Staging, recover, staged_publication
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests.conftest import subprocess_env
from fw_assets_tests.helpers import materialize_dump, published_tree


def _folder_with(path, name, text):
    path.mkdir(parents=True)
    (path / name).write_text(text)
    return path


def test_publish_replaces_whole_targets_and_removes_those_mapped_to_none(tmp_path):
    old_a = _folder_with(tmp_path / "en/2.8/D", "old.parquet", "old a")
    _folder_with(tmp_path / "en/3.0/D", "old.parquet", "old b")
    with staged_publication(tmp_path, "bucketed-D") as staging:
        new_a = _folder_with(staging.path / "a", "new.parquet", "new a")
        staging.publish({old_a: new_a, tmp_path / "en/3.0/D": None})
    assert [p.name for p in (tmp_path / "en/2.8/D").iterdir()] == ["new.parquet"]
    assert not (tmp_path / "en/3.0/D").exists()
    assert not list((tmp_path / ".staging").glob("bucketed-D.*"))


def test_a_run_failing_before_publish_leaves_the_previous_output(tmp_path):
    _folder_with(tmp_path / "en/2.8/D", "old.parquet", "old")
    with pytest.raises(RuntimeError), staged_publication(tmp_path, "bucketed-D") as staging:
        _folder_with(staging.path / "a", "half.parquet", "half")
        raise RuntimeError("contract failed")
    assert [p.name for p in (tmp_path / "en/2.8/D").iterdir()] == ["old.parquet"]
    assert not list((tmp_path / ".staging").glob("bucketed-D.*"))


def test_a_publication_killed_between_renames_is_rolled_forward_by_the_next_run(tmp_path):
    targets = [tmp_path / f"en/{b}/D" for b in ("2.8", "3.0")]
    for target in targets:
        _folder_with(target, "old.parquet", "old")
    staging = Staging(tmp_path, "bucketed-D")
    staged = [_folder_with(staging.path / b, "new.parquet", "new") for b in ("a", "b")]
    (staging.path / JOURNAL).write_text(
        json.dumps([{"target": str(t), "staged": str(s)} for t, s in zip(targets, staged)])
    )
    # the killed run had moved the first bucket only
    os.rename(targets[0], staging.path / "moved-aside")
    os.rename(staged[0], targets[0])

    recover(tmp_path, "bucketed-D")
    for target in targets:
        assert [p.read_text() for p in target.iterdir()] == ["new"]
    assert not staging.path.exists()


def test_recover_leaves_other_dumps_staging_alone(tmp_path):
    mine = Staging(tmp_path, "bucketed-CC-MAIN-2013-20")
    other = Staging(tmp_path, "bucketed-CC-MAIN-2013-48")
    recover(tmp_path, "bucketed-CC-MAIN-2013-20")
    assert not mine.path.exists()
    assert other.path.exists()


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
        [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "fw_assets.definitions",
         "--select", "bucketed", "--partition", dump],
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
