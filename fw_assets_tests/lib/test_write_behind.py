"""A file written through a bounded window of the page cache: its bytes are the bytes given, and
the cache holds only its last windows, not the whole file."""

import ctypes
import errno
import mmap
import sys
from pathlib import Path

import numpy as np
import pytest

from fw_assets.lib import write_behind
from fw_assets.lib.write_behind import WINDOWS_IN_FLIGHT, WriteBehindFile

WINDOW = 1 << 18


def _cached_bytes(path: Path) -> int:
    """How much of the file the page cache holds (mincore(2) over a map of it)."""
    with open(path, "r+b") as stream, mmap.mmap(stream.fileno(), 0) as mapped:
        pages = (len(mapped) + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        resident = (ctypes.c_ubyte * pages)()
        address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(len(mapped)), resident) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        cached = sum(page & 1 for page in resident) * mmap.PAGESIZE
        del address  # the map's buffer export ends here, so it can close
    return cached


def _on_tmpfs(path: Path) -> bool:
    mounts = [line.split()[1:3] for line in Path("/proc/mounts").read_text().splitlines()]
    point, kind = max(((p, k) for p, k in mounts if str(path).startswith(p)), key=lambda m: len(m[0]))
    return kind == "tmpfs"


def test_the_file_holds_exactly_the_bytes_written_whatever_their_sizes(tmp_path):
    rng = np.random.default_rng(7)
    pieces = [rng.integers(0, 256, size, dtype=np.uint8) for size in (0, 1, WINDOW - 1, 3 * WINDOW + 5, 17, WINDOW)]
    path = tmp_path / "tokens.bin"
    writer = WriteBehindFile(path, window=WINDOW)
    for piece in pieces:
        writer.write(piece)
    writer.write(np.arange(5, dtype=np.int32))  # any buffer, as bytes
    writer.close()
    assert path.read_bytes() == b"".join(p.tobytes() for p in pieces) + np.arange(5, dtype=np.int32).tobytes()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range and mincore are Linux's")
def test_the_page_cache_holds_only_the_last_windows_of_a_large_file(tmp_path):
    if _on_tmpfs(tmp_path):
        pytest.skip("tmpfs pages are the file itself: they cannot leave the cache")
    path = tmp_path / "tokens.bin"
    writer = WriteBehindFile(path, window=WINDOW)
    chunk = np.random.default_rng(3).integers(0, 2**31, WINDOW // 8, dtype=np.int32)  # half a window
    for _ in range(64):  # 32 windows
        writer.write(chunk)
    writer.close()
    assert path.stat().st_size == 32 * WINDOW
    # written as usual, all 8 MB would still be cached: nothing else reads or evicts them here
    assert _cached_bytes(path) <= (WINDOWS_IN_FLIGHT + 2) * WINDOW


def _sync_file_range_failing_with(error: int):
    def sync_file_range(fd, offset, length, flags):
        ctypes.set_errno(error)
        return -1

    return sync_file_range


def test_a_file_system_that_cannot_write_ranges_out_gets_the_file_written_as_usual(tmp_path, monkeypatch):
    monkeypatch.setattr(write_behind, "_sync_file_range", lambda: _sync_file_range_failing_with(errno.EINVAL))
    data = np.random.default_rng(5).integers(0, 256, 10 * WINDOW, dtype=np.uint8)
    writer = WriteBehindFile(tmp_path / "tokens.bin", window=WINDOW)
    for piece in np.array_split(data, 7):
        writer.write(piece)
    writer.close()
    assert (tmp_path / "tokens.bin").read_bytes() == data.tobytes()


def test_an_error_of_the_disk_while_writing_out_is_raised_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(write_behind, "_sync_file_range", lambda: _sync_file_range_failing_with(errno.EIO))
    writer = WriteBehindFile(tmp_path / "tokens.bin", window=WINDOW)
    with pytest.raises(OSError, match="tokens.bin out to the disk") as raised:
        writer.write(np.zeros(2 * WINDOW, np.uint8))
    writer.close()
    assert raised.value.errno == errno.EIO
