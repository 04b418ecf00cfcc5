"""A published file's checksum: xxh3-128 of its bytes, whether read back or computed while written."""

import os

import numpy as np
import pytest
import xxhash

from fw_assets.lib import checksums
from fw_assets.lib.checksums import file_checksum, linked_file, staged_checksum
from fw_assets.lib.write_behind import WriteBehindFile


def test_a_files_checksum_is_xxh3_128_of_its_bytes_read_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(checksums, "CHUNK_BYTES", 1000)
    data = np.random.default_rng(1).integers(0, 256, 10_500, dtype=np.uint8).tobytes()
    (tmp_path / "f").write_bytes(data)
    (tmp_path / "empty").write_bytes(b"")
    assert file_checksum(tmp_path / "f") == xxhash.xxh3_128_hexdigest(data)
    assert file_checksum(tmp_path / "empty") == xxhash.xxh3_128_hexdigest(b"")


def test_a_file_written_behind_is_never_read_back_for_its_checksum(tmp_path, monkeypatch):
    path = tmp_path / "tokens.bin"
    writer = WriteBehindFile(path, window=1 << 16)
    for seed in range(5):
        writer.write(np.random.default_rng(seed).integers(0, 2**31, 40_000, dtype=np.int32))
    writer.close()
    expected = xxhash.xxh3_128_hexdigest(path.read_bytes())
    monkeypatch.setattr(checksums, "file_checksum", lambda path: pytest.fail("read back"))
    assert staged_checksum(path) == expected
    link = tmp_path / "view.bin"
    os.link(path, link)  # a hard link is the same file
    assert staged_checksum(link) == expected and linked_file(link) is None
    checksums.remember(link, expected, path)  # a staged link to a published file, as a plan's views
    assert staged_checksum(link) == expected and linked_file(link) == path


def test_a_file_changed_after_it_was_written_is_read_back(tmp_path):
    path = tmp_path / "tokens.bin"
    writer = WriteBehindFile(path)
    writer.write(b"\x01" * 4096)
    writer.close()
    with open(path, "r+b") as stream:  # same size, written in place: a new modification time
        stream.write(b"\x02")
    os.utime(path, ns=(0, os.stat(path).st_mtime_ns + 1))
    assert staged_checksum(path) == xxhash.xxh3_128_hexdigest(path.read_bytes())
