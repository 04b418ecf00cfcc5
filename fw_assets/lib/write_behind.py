"""Writing a large file front to back through a bounded window of the page cache.

A dump's token files are gigabytes that nothing reads during the run. Written as usual, all of
them pile up in the page cache as dirty pages: each page is a fresh one the kernel has to find
(on a virtual machine that hands freed memory back to its host, a fault on the host too), and
past the kernel's dirty limits every writer of the machine is throttled while they are flushed.
So, as PostgreSQL's `backend_flush_after` and RocksDB's `bytes_per_sync` do, each window written
is sent to the disk at once (`sync_file_range`), and a few windows later, once on the disk,
dropped from the cache (`POSIX_FADV_DONTNEED`): the kernel reuses those pages for the next
windows. Measured on the benchmark machine: `tokenized` of a 300k-document multi-script dump
takes ~8 CPU-seconds less in ~70 (docs/benchmarks.md). Linux only; elsewhere the file is written
as usual. Its checksum is computed from the bytes as they are written and remembered for its
generation record (fw_assets.lib.checksums): it is never read back.
"""

import ctypes
import errno
import os
from collections.abc import Callable
from pathlib import Path

from fw_assets.lib import checksums
from fw_assets.lib.libc import libc_function

WINDOW_BYTES = 16 * 2**20
# Windows sent to the disk but still cached: the disk has this much time to catch up before a
# write waits for it.
WINDOWS_IN_FLIGHT = 4

_WAIT_BEFORE, _WRITE, _WAIT_AFTER = 1, 2, 4  # sync_file_range(2) flags
# What a file system that cannot write a range out says: the file is then written as usual.
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ESPIPE}


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """sync_file_range(2), or None where there is none (not Linux)."""
    if not hasattr(os, "posix_fadvise"):
        return None
    return libc_function("sync_file_range", (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint))


class WriteBehindFile:
    """A new binary file, written front to back by `write`; the page cache holds at most
    WINDOWS_IN_FLIGHT + 1 windows of it. `close()` leaves the last windows to the kernel and
    remembers the file's checksum."""

    def __init__(self, path: Path, window: int = WINDOW_BYTES) -> None:
        self.path = Path(path)
        self._file = open(self.path, "wb", buffering=0)
        self._sync_file_range = _sync_file_range()
        self._behind = self._sync_file_range is not None
        self._window = window
        self._written = 0
        self._sent = 0  # bytes handed to the disk
        self._dropped = 0  # bytes on the disk and out of the cache
        self._checksum = checksums.new_checksum()

    def write(self, data) -> None:
        view = memoryview(data).cast("B")
        size = view.nbytes
        self._checksum.update(view)
        while view:  # a raw write may take less than it is given
            view = view[self._file.write(view) :]
        self._written += size
        if self._behind:
            self._write_behind()

    def _write_behind(self) -> None:
        while self._written - self._sent >= self._window:
            if not self._sync_window(self._sent, _WRITE):  # starts writing it out, does not wait
                return
            self._sent += self._window
            if self._sent - self._dropped > WINDOWS_IN_FLIGHT * self._window:
                if not self._sync_window(self._dropped, _WAIT_BEFORE | _WRITE | _WAIT_AFTER):
                    return
                os.posix_fadvise(self._file.fileno(), self._dropped, self._window, os.POSIX_FADV_DONTNEED)
                self._dropped += self._window

    def _sync_window(self, offset: int, flags: int) -> bool:
        """Whether the window went out; False (and written as usual from now on) where the file
        system cannot; an error of the disk is raised."""
        if self._sync_file_range(self._file.fileno(), offset, self._window, flags) == 0:
            return True
        error = ctypes.get_errno()
        if error not in _UNSUPPORTED:  # e.g. EIO: the bytes written did not reach the disk
            raise OSError(error, f"{os.strerror(error)}: writing {self.path} out to the disk")
        self._behind = False
        return False

    def close(self) -> None:
        self._file.close()
        checksums.remember(self.path, self._checksum.hexdigest())
