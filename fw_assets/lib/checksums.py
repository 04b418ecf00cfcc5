"""The checksum of a published file, as its generation record holds it: xxh3-128 of its bytes.

xxh3 (xxhash, a dependency already) hashes about 15 GB/s here, so checking a file costs reading
it, not hashing it. A file the project writes through its own streaming writer (lib/write_behind.py,
the token files' `.bin`, gigabytes it drops from the page cache as it goes) is hashed as its bytes
are written and its checksum remembered for the file as it is then (`remember`); every other staged
file is read back once when it is published (`staged_checksum`), right after its step wrote it.
"""

import os
from pathlib import Path

import xxhash

ALGORITHM = "xxh3_128"
DIGEST_LENGTH = 32  # hex digits
CHUNK_BYTES = 8 * 2**20

# A checksum computed while writing, by the written file's identity: the same inode, size and
# modification time (a rename or a hard link keeps all three; a write in place changes the time).
_remembered: dict[tuple[int, int, int, int], str] = {}


def new_checksum():
    """A running checksum: `.update(bytes)` for each piece in order, then `.hexdigest()`."""
    return xxhash.xxh3_128()


def file_checksum(path: Path) -> str:
    """The checksum of the file's bytes, read front to back in chunks (memory for one chunk)."""
    digest = new_checksum()
    buffer = memoryview(bytearray(CHUNK_BYTES))
    with open(path, "rb", buffering=0) as stream:
        while size := stream.readinto(buffer):
            digest.update(buffer[:size])
    return digest.hexdigest()


def _identity(status: os.stat_result) -> tuple[int, int, int, int]:
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def remember(path: Path, digest: str) -> None:
    """`digest` is the checksum of the bytes just written to `path` (or of the file `path` is a
    hard link to): `staged_checksum` takes it instead of reading the file back."""
    _remembered[_identity(os.stat(path))] = digest


def staged_checksum(path: Path) -> str:
    """The checksum of a file about to be published: the one remembered for it as it is now,
    else read back from it."""
    return _remembered.get(_identity(os.stat(path))) or file_checksum(path)


def forget(paths: list[Path]) -> None:
    """Drop what was remembered for `paths` (published: nothing will ask again)."""
    for path in paths:
        _remembered.pop(_identity(os.stat(path)), None)
