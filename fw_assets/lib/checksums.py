"""The checksum of a published file, as its generation record holds it: xxh3-128 of its bytes.

xxh3 (xxhash, a dependency already) hashes about 15 GB/s here, so checking a file costs reading
it, not hashing it. A file the project writes through its own streaming writer (lib/write_behind.py,
the token files' `.bin`, gigabytes it drops from the page cache as it goes) is hashed as its bytes
are written and its checksum remembered for the file as it is then (`remember`); so is a hard link
to a published file, with the file it links (`linked_file`), whose checksum its record holds; every
other staged file is read back once when it is published (`staged_checksum`), right after its step
wrote it.
"""

import os
from pathlib import Path

import xxhash

ALGORITHM = "xxh3_128"
DIGEST_LENGTH = 32  # hex digits
CHUNK_BYTES = 8 * 2**20

# A checksum known without reading the file (and the published file it is a hard link to, if it is
# one), by the file's identity: the same inode, size and modification time (a rename or a hard link
# keeps all three; a write in place changes the time).
_remembered: dict[tuple[int, int, int, int], tuple[str, Path | None]] = {}


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


def remember(path: Path, digest: str, link_of: Path | None = None) -> None:
    """`digest` is the checksum of the bytes just written to `path`, or of the published file
    `link_of` that `path` is a hard link to: `staged_checksum` takes it instead of reading the file."""
    _remembered[_identity(os.stat(path))] = (digest, link_of)


def staged_checksum(path: Path) -> str:
    """The checksum of a file about to be published: the one remembered for it as it is now,
    else read back from it."""
    known = _remembered.get(_identity(os.stat(path)))
    return known[0] if known else file_checksum(path)


def linked_file(path: Path) -> Path | None:
    """The published file a staged file was remembered as a hard link to (None: none)."""
    known = _remembered.get(_identity(os.stat(path)))
    return known[1] if known else None


def same_file(path: Path, other: Path) -> bool:
    """Whether both paths are one file (hard links of one inode), as they are now."""
    try:
        return os.path.samefile(path, other)
    except OSError:  # either is gone
        return False


def forget(paths: list[Path]) -> None:
    """Drop what was remembered for `paths` (published: nothing will ask again)."""
    for path in paths:
        _remembered.pop(_identity(os.stat(path)), None)
