"""What a dump folder holds right now (names, sizes, mtimes) and whether it is completely downloaded.

A dump is ready when no file is still being written and either every shard of its Hugging Face
`train-XXXXX-of-NNNNN` set is present, or (other names) nothing in the folder changed for a settle
period. Every data file must also end with the parquet footer magic, so a file copied in place under
its final name is not taken while the copy runs.
"""

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from fw_assets.formats.manifest import is_apple_double, source_files

HF_SHARD = re.compile(r"train-([0-9]{5})-of-([0-9]{5})\.parquet", re.ASCII)  # matched whole
# Names download tools give a file until it is complete: huggingface_hub (.incomplete), rsync
# (hidden `.name.XXXXXX`), curl/wget/aria2 (.part, .partial), this project's sample writer (.tmp).
TEMP_SUFFIXES = (".tmp", ".incomplete", ".part", ".partial", ".download", ".crdownload")
PARQUET_MAGIC = b"PAR1"
EXAMPLES = 3


@dataclass(frozen=True)
class FileState:
    name: str
    bytes: int
    mtime_ns: int


@dataclass(frozen=True)
class DumpFolderState:
    """One look at a dump folder: its data files and the files still being written."""

    dump: str
    folder: Path
    files: tuple[FileState, ...]
    in_progress: tuple[str, ...]
    folder_mtime_ns: int

    @property
    def fingerprint(self) -> str:
        """Short hash of every data file's name, size and mtime: changes when any file does."""
        spec = [[f.name, f.bytes, f.mtime_ns] for f in self.files]
        return hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:16]

    @property
    def newest_change_ns(self) -> int:
        return max([self.folder_mtime_ns] + [f.mtime_ns for f in self.files])


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str


def is_in_progress(name: str) -> bool:
    """A file a download tool is still writing: a temp suffix, or a hidden parquet-named file
    (but not a macOS AppleDouble `._name`, which is never data)."""
    hidden_temp = name.startswith(".") and ".parquet" in name and not is_apple_double(Path(name))
    return name.endswith(TEMP_SUFFIXES) or hidden_temp


def broken_links(paths: list[Path]) -> list[str]:
    """Names of the symbolic links among `paths` whose target does not exist."""
    return [p.name for p in paths if p.is_symlink() and not p.exists()]


def shard_set_gaps(names: list[str]) -> str | None:
    """What is wrong with the Hugging Face `train-XXXXX-of-NNNNN` set among `names` (missing shards,
    several sets, shard numbers beyond the set size), or None when it is complete or absent."""
    shards = [(name, m) for name in names if (m := HF_SHARD.fullmatch(name))]
    if not shards:
        return None
    totals = sorted({int(m[2]) for _, m in shards})
    if len(totals) > 1:
        sets = ", ".join(f"-of-{t:05d}" for t in totals)
        return f"holds shards of several sets ({sets})"
    total = totals[0]
    beyond = [name for name, m in shards if int(m[1]) >= total]
    if beyond:
        return f"shard numbers beyond the set size ({_names(beyond)})"
    present = {int(m[1]) for _, m in shards}
    missing = [f"train-{i:05d}-of-{total:05d}.parquet" for i in range(total) if i not in present]
    if missing:
        return f"{len(missing)} of {total} shards missing ({_names(missing)})"
    return None


def scan_dump_folder(dump: str, folder: Path) -> DumpFolderState:
    """Stat the folder's files (no data is read)."""
    in_progress = tuple(sorted(p.name for p in folder.iterdir() if is_in_progress(p.name)))
    paths = source_files(folder)
    in_progress += tuple(f"{name} (a link to a missing file)" for name in broken_links(paths))
    files = []
    for path in paths:
        if path.name in in_progress or not path.exists():
            continue
        stat = path.stat()
        files.append(FileState(path.name, stat.st_size, stat.st_mtime_ns))
    return DumpFolderState(dump, folder, tuple(files), in_progress, folder.stat().st_mtime_ns)


def readiness(state: DumpFolderState, now_ns: int, settle_seconds: float) -> Readiness:
    """Whether the dump can be processed now; if not, a reason that names the files involved."""
    if state.in_progress:
        reason = f"{_count(state.in_progress, 'file')} still being written ({_names(state.in_progress)})"
        return Readiness(False, reason)
    if not state.files:
        return Readiness(False, "no parquet files yet")
    names = [f.name for f in state.files]
    complete = (
        _shard_set_readiness(names)
        if all(HF_SHARD.fullmatch(name) for name in names)
        else _settled_readiness(state, now_ns, settle_seconds)
    )
    if not complete.ready:
        return complete
    unfinished = [name for name in names if not _has_parquet_footer(state.folder / name)]
    if unfinished:
        reason = f"{_count(unfinished, 'file')} without a parquet footer yet ({_names(unfinished)})"
        return Readiness(False, reason)
    return complete


def _shard_set_readiness(names: list[str]) -> Readiness:
    gaps = shard_set_gaps(names)
    if gaps:
        return Readiness(False, gaps)
    return Readiness(True, f"all {len(names)} shards present")


def _settled_readiness(state: DumpFolderState, now_ns: int, settle_seconds: float) -> Readiness:
    quiet = (now_ns - state.newest_change_ns) / 1e9
    if quiet < settle_seconds:
        return Readiness(
            False,
            f"changed {quiet:.0f}s ago; files not named train-XXXXX-of-NNNNN are taken once nothing "
            f"changed for {settle_seconds:.0f}s",
        )
    return Readiness(True, f"{_count(state.files, 'file')} unchanged for {quiet:.0f}s")


def _has_parquet_footer(path: Path) -> bool:
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        if size < 2 * len(PARQUET_MAGIC):
            return False
        handle.seek(size - len(PARQUET_MAGIC))
        return handle.read() == PARQUET_MAGIC


def _names(names: list[str] | tuple[str, ...]) -> str:
    shown = ", ".join(names[:EXAMPLES])
    return shown + (f", and {len(names) - EXAMPLES} more" if len(names) > EXAMPLES else "")


def _count(items, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"
