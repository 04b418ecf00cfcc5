"""A full or read-only output disk fails the step with a message naming the path and the space
it needs, never a traceback, and never changes what was published (real tmpfs mounts)."""

import random
import re
import shutil
import string
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.paths import publication_name, staging_root
from fw_assets.synthetic import write_sample_dump
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.disks import mount, tmpfs
from fw_assets_tests.support.runs import SAMPLE_DUMPS, materialize_dump
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


def compressible_dump(source, dump: str) -> None:
    """A dump whose texts repeat a sentence of their own (zstd shrinks each ~50 times, no two alike)."""
    for path in write_sample_dump(source, dump, rows=3_000, files=1, seed=4):
        table = pq.read_table(path)
        rng = random.Random(4)
        texts = []
        for _ in range(table.num_rows):
            sentence = " ".join("".join(rng.choices(string.ascii_lowercase, k=8)) for _ in range(12)) + ". "
            texts.append(sentence * 40)
        pq.write_table(table.set_column(table.schema.get_field_index("text"), "text", pa.array(texts)), path)


UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def figures(message: str) -> tuple[float, float]:
    """(bytes it says it needs, bytes it says are free) of a full-disk message."""
    size = r"([\d.,]+) (bytes|KiB|MiB|GiB)"
    need, need_unit, free, free_unit = re.search(f"needs about {size} free.*; {size} is free now", message).groups()
    return float(need.replace(",", "")) * UNITS[need_unit], float(free.replace(",", "")) * UNITS[free_unit]


@pytest.mark.e2e
def test_a_full_disk_while_tokenizing_compressible_text_needs_more_than_is_free(tmp_path):
    """Texts that compress well take far more room as tokens than as parquet: the space `tokenized`
    says it needs is estimated from the text itself, so it is more than was free when it ran out."""
    source = tmp_path / "source"
    compressible_dump(source, DUMP)
    with tmpfs(tmp_path / "output", "256m") as output:
        materialize_dump(source, output, DUMP)
        text = sum(pq.read_metadata(f).row_group(g).column(1).total_uncompressed_size
                   for f in output.glob("en/*/*/*.parquet") for g in range(pq.read_metadata(f).num_row_groups))
        mount("-o", f"remount,size={shutil.disk_usage(output).used + text // 2}", str(output))
        result = materialize_dump(source, output, DUMP, assets=[tokenized], raise_on_error=False,
                                  extra_resources={"tokenizer": TokenizerResource(workers=1)})
        message = failure(result, "tokenized")
        need, free = figures(message)
        assert need > free, message


@pytest.mark.e2e
def test_a_read_only_bind_mount_inside_the_output_is_named_as_such(sample_source, published_dump):
    """`en/` bind-mounted read-only onto itself: a rename from the staging folder into it crosses
    mounts (EXDEV) before the kernel looks at permissions. The message names the mount, not the
    permissions, and nothing changes."""
    folder = published_dump / "en"
    before = published_tree(published_dump)
    mount("--bind", str(folder), str(folder))
    try:
        mount("-o", "remount,bind,ro", str(folder))
        result = materialize_dump(sample_source, published_dump, DUMP, assets=[bucketed], raise_on_error=False)
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
    message = str(result.get_step_failure_events()[0].event_specific_data.error)
    for expected in (f"Dump {DUMP}: could not publish bucketed", "is on a mount of its own", "read-only",
                     f"same mount as {published_dump / '.staging'}", "previous output is published unchanged"):
        assert expected in message, message
    assert "Fix the permissions" not in message
    assert published_tree(published_dump) == before
