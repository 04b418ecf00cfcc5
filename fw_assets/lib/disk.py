"""Errors of the output disk (full, read-only, not ours) told as what to do, not as a traceback."""

import errno
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

_FULL = (errno.ENOSPC, errno.EDQUOT)
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)
# DuckDB reports the operating system's error as text, quoting the file it was writing.
_DUCKDB_FULL = ("No space left on device", "Disk quota exceeded")
_DUCKDB_NOT_WRITABLE = ("Read-only file system", "Permission denied", "Operation not permitted")
_QUOTED_PATH = re.compile(r'"(/[^"\\]+)')  # inside DuckDB's JSON the quotes come escaped


class OutputDiskError(RuntimeError):
    """The step could not write its output; the message says where and what to do."""


@dataclass(frozen=True)
class SpaceNeed:
    """About how much free space a step needs on the output disk, and how that is estimated."""

    bytes: int
    estimate: str  # e.g. "the dump's source size"


@contextmanager
def explaining_disk_errors(output_root: Path, partition: str, step: str, need: SpaceNeed) -> Iterator[None]:
    """Turn a full or unwritable output disk, from Python or from DuckDB, into an OutputDiskError
    naming the partition ("Dump CC-MAIN-2013-20", "Recipe demo"), the path, the free space and the
    space the step needs; other errors pass unchanged."""
    try:
        yield
    except OSError as error:
        if error.errno not in _FULL + _NOT_WRITABLE:
            raise
        kind = "full" if error.errno in _FULL else "not writable"
        where = Path(error.filename) if error.filename else output_root
        message = _message(kind, where, output_root, partition, step, need, error.strerror)
        raise OutputDiskError(message) from error
    except duckdb.IOException as error:
        text = str(error)
        full = [s for s in _DUCKDB_FULL if s in text]
        not_writable = [s for s in _DUCKDB_NOT_WRITABLE if s in text]
        if not full and not not_writable:
            raise
        quoted = _QUOTED_PATH.search(text)
        where = Path(quoted[1]) if quoted else output_root
        kind, cause = ("full", full[0]) if full else ("not writable", not_writable[0])
        raise OutputDiskError(_message(kind, where, output_root, partition, step, need, cause)) from error


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """Give an operating-system error raised without a file name (Arrow's writers raise them) the
    `path` being written, so that a full or read-only disk is reported where it happened."""
    try:
        yield
    except OSError as error:
        if error.filename or not error.errno:
            raise
        raise OSError(error.errno, error.strerror or str(error), str(path)) from error


def _message(
    kind: str, where: Path, output_root: Path, partition: str, step: str, need: SpaceNeed, cause: str
) -> str:
    unchanged = "Nothing was published; the previous output is unchanged."
    if kind == "full":
        free = _free_bytes(where)
        return (
            f"{partition}: {step} ran out of disk space writing {where} ({cause}). It needs about "
            f"{_size(need.bytes)} free under {output_root} ({need.estimate}); {_size(free)} is free "
            f"now. Free some space or set FW_OUTPUT_DIR to a larger disk, then run it again. {unchanged}"
        )
    return (
        f"{partition}: {step} cannot write {where} ({cause}). It writes its work in progress under "
        f"{output_root / '.staging'} and publishes under {output_root}: make both writable for this "
        f"user, or set FW_OUTPUT_DIR to a writable folder. {unchanged}"
    )


def _free_bytes(path: Path) -> int:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return shutil.disk_usage(candidate).free
    return 0


def _size(n: int) -> str:
    if n < 1024:
        return f"{n:,} bytes"
    value, unit = float(n), "bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024:
            break
    return f"{value:,.1f} {unit}"
