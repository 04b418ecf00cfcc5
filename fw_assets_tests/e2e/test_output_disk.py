"""A full or read-only output disk fails the step with a message naming the path and the space
it needs, never a traceback, and never changes what was published (real tmpfs mounts)."""

import shutil

import pytest

from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.paths import publication_name, staging_root
from fw_assets_tests.support.runs import SAMPLE_DUMPS
from fw_assets_tests.support.disks import mount, tmpfs
from fw_assets_tests.support.runs import materialize_dump
from fw_assets_tests.support.trees import published_tree

DUMP = SAMPLE_DUMPS[0]


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB filesystem of its own, unmounted after the test."""
    with tmpfs(tmp_path / "disk", "2m") as disk:
        yield disk


def failure(result, step: str) -> str:
    return result.failure_data_for_node(step).user_failure_data.description


@pytest.mark.e2e
def test_a_full_disk_names_the_path_and_the_space_needed(sample_source, small_disk):
    result = materialize_dump(sample_source, small_disk, DUMP, raise_on_error=False)
    message = failure(result, "bucketed")
    for expected in (f"Dump {DUMP}: bucketed ran out of disk space writing {small_disk}",
                     "needs about", "at most the dump's source size", "is free now",
                     "previous output is unchanged"):
        assert expected in message, message
    assert not any(path.startswith("en/") for path in published_tree(small_disk))


@pytest.mark.e2e
def test_a_read_only_output_names_the_path_and_keeps_the_published_files(sample_source, tmp_path):
    with tmpfs(tmp_path / "output", "64m") as output:
        materialize_dump(sample_source, output, DUMP)
        before = published_tree(output)
        mount("-o", "remount,ro", str(output))
        result = materialize_dump(sample_source, output, DUMP, raise_on_error=False)
        message = failure(result, "raw")
        for expected in (f"Dump {DUMP}: raw cannot write {output}", "Read-only file system",
                         "make both writable", "previous output is unchanged"):
            assert expected in message, message
        assert published_tree(output) == before


@pytest.fixture
def published_dump(sample_source, tmp_path):
    """A tmpfs holding the dump's whole chain, published; unmounted after the test."""
    with tmpfs(tmp_path / "output", "64m") as output:
        materialize_dump(sample_source, output, DUMP)
        yield output


@pytest.mark.e2e
@pytest.mark.parametrize("asset", [minhash, deduplicated], ids=["minhash", "deduplicated"])
def test_a_full_disk_while_signing_or_deciding_names_the_path_and_keeps_the_previous_output(
    sample_source, published_dump, asset
):
    before = published_tree(published_dump)
    room = shutil.disk_usage(published_dump).used + 8 * 1024  # a page or two left
    mount("-o", f"remount,size={room}", str(published_dump))
    result = materialize_dump(sample_source, published_dump, DUMP, assets=[asset], raise_on_error=False)
    message = failure(result, asset.key.to_user_string())
    stage = {"minhash": "minhash", "deduplicated": "dedup"}[asset.key.to_user_string()]
    staged = staging_root(published_dump) / publication_name(stage, DUMP)
    for expected in (f"Dump {DUMP}: {asset.key.to_user_string()} ran out of disk space writing {staged}.",
                     "needs about", "is free now", "previous output is unchanged"):
        assert expected in message, message
    assert "needs about 0 bytes" not in message
    assert published_tree(published_dump) == before
    assert not list(staging_root(published_dump).glob(f"{publication_name(stage, DUMP)}.*"))  # nothing half-written


@pytest.mark.e2e
@pytest.mark.parametrize("asset", [minhash, deduplicated], ids=["minhash", "deduplicated"])
def test_a_read_only_output_while_signing_or_deciding_names_the_path_and_keeps_the_previous_output(
    sample_source, published_dump, asset
):
    before = published_tree(published_dump)
    mount("-o", "remount,ro", str(published_dump))
    result = materialize_dump(sample_source, published_dump, DUMP, assets=[asset], raise_on_error=False)
    message = failure(result, asset.key.to_user_string())
    for expected in (f"Dump {DUMP}: {asset.key.to_user_string()} cannot write {published_dump}",
                     "Read-only file system", "make both writable", "previous output is unchanged"):
        assert expected in message, message
    assert published_tree(published_dump) == before
