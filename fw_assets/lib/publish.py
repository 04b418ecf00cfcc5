"""Publish by rename, all or nothing: one publication of an output of one dump (e.g. `bucketed` of
CC-MAIN-2013-20, every bucket folder of it) replaces the previous one whole, or not at all.

Outputs are written under `<output_root>/.staging/<name>.<id>/` (fw_assets.paths), on the same
filesystem as the published paths, so publishing is a series of renames. Before the first rename
a journal lists them; each old target is moved aside into the staging folder, not deleted. If a
rename fails, the ones already done are undone before the error is raised. If the publishing
process dies half-way (kill -9, the OOM killer), the journal stays behind, and the next run or
reader of any output of that dump rolls the publication back first: the killed run's output never
appears, as its run was never recorded as a success.

Each publication also writes a generation record, `<output_root>/published/<name>.json`, renamed
into place in the same series: every published file with its size and checksum (fw_assets.lib.checksums),
what the writer says about its content (e.g. a bucket that holds no rows), the code version that
wrote it and its `inputs`: each publication it was made from, by name, with the generation it read
(None: not published then) and the identity that mattered to it. Its one schema is
fw_assets.lib.generation_record: a record that fails it is refused wherever it is read, never taken
for something it does not say. Readers use the record, not a folder listing, so an absent folder is
never mistaken for an empty output, and `changed_inputs` tells a reader when what an output was made
from has been replaced since. A writer whose contents hold a `content_version` says that two of its
generations with the same content version are the same data: an input recorded with it stays current
across them.

Two locks per name, both `flock`s (released by the kernel when a process dies, however it dies):
`<name>.write.lock`, held by a writer from staging to publishing (one writer at a time), and
`<name>.lock`, held exclusively for the renames and shared by readers while they read. A reader
therefore sees one generation from start to end, and a writer waits for readers before it renames.
"""

import errno
import fcntl
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fw_assets.lib import checksums
from fw_assets.lib.checksums import ALGORITHM
from fw_assets.lib.fence import pass_fence
from fw_assets.lib.generation_record import LINK_OF, RECORD_FORMAT, RecordRefused, file_entry, parse_record, sealed
from fw_assets.paths import generation_record_path, publish_locks_dir, staging_root

JOURNAL = "PUBLISH.json"
RECORD_STAGED = "generation.json"

Log = Callable[[str], None]
# Which published files of a record a reader checks against their checksums (by relative path):
# those it reads whole anyway. Every file is checked to be there with its size.
FileSelection = Callable[[str], bool]


def every_file(relative: str) -> bool:
    return True


def no_file(relative: str) -> bool:
    return False


def files_ending(*suffixes: str) -> FileSelection:
    """The files whose path ends with one of `suffixes` (e.g. `.idx`, `.docs.parquet`)."""
    return lambda relative: relative.endswith(suffixes)


class PublishError(RuntimeError):
    """A publication could not be completed; what was already moved has been put back."""


class PublishedOutputChanged(RuntimeError):
    """A published file is missing, or has another size or other bytes than its generation record
    says; `name` is the publication, `problems` each file's."""

    def __init__(self, name: str, record: dict, problems: list[str]) -> None:
        shown = "; ".join(problems[:5]) + (f", and {len(problems) - 5} more" if len(problems) > 5 else "")
        super().__init__(f"The published {name} was changed outside the pipeline since generation "
                         f"{record['generation']} ({record['published_at']}): {shown}.")
        self.name, self.problems = name, problems


@contextmanager
def _flock(path: Path, mode: int, log: Log | None, waiting_for: str) -> Iterator[None]:
    """Hold `flock(mode)` on `path`; say once what we wait for when someone else holds it.

    A blocking flock is interrupted by Ctrl-C or SIGTERM (Dagster turns both into an exception)."""
    with _open_lock(path) as lock_file:
        try:
            fcntl.flock(lock_file, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            if log:
                log(f"Waiting for {waiting_for} (lock {path}).")
            fcntl.flock(lock_file, mode)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _open_lock(path: Path):
    """The lock file, created if need be; on a read-only output an existing one opened for reading
    (flock needs no write access), so that readers still read and a writer fails where it writes."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a")
    except OSError as error:
        if error.errno != errno.EROFS or not path.exists():
            raise
        return open(path)


def _lock_path(output_root: Path, name: str, kind: str = "") -> Path:
    return publish_locks_dir(output_root) / f"{name}{kind}.lock"


class Staging:
    """A fresh staging folder for one publication of `name`, an output of `dump`, by code of
    `code_version` (the publishing asset's)."""

    def __init__(self, output_root: Path, name: str, dump: str, code_version: str, log: Log | None = None):
        self.output_root = output_root
        self.name = name
        self.dump = dump
        self.code_version = code_version
        self.log = log
        self.generation = uuid.uuid4().hex[:12]
        self.path = staging_root(output_root) / f"{name}.{self.generation}"
        self.path.mkdir(parents=True)

    def publish(
        self,
        moves: Mapping[Path, Path | None],
        contents: Mapping[str, Any] | None = None,
        *,
        inputs: Mapping[str, Mapping[str, Any]],
    ) -> dict:
        """Move each staged path onto its target (a target mapped to None is removed), together
        with the generation record holding `contents` and `inputs` (name -> `input_entry`). All or
        nothing; returns the record.

        Every target is replaced whole: what it held before is moved aside, never merged into.
        """
        record = self._record(moves, contents or {}, inputs)
        staged_record = self.path / RECORD_STAGED
        _write_durably(staged_record, json.dumps(record, indent=1))
        all_moves = {**moves, generation_record_path(self.output_root, self.name): staged_record}
        journal = {
            "name": self.name,
            "dump": self.dump,
            "moves": [
                {
                    "target": str(target),
                    "staged": str(staged) if staged else None,
                    "aside": str(self.path / "replaced" / str(i)),
                }
                for i, (target, staged) in enumerate(all_moves.items())
            ],
        }
        lock = _lock_path(self.output_root, self.name)
        with _flock(lock, fcntl.LOCK_EX, self.log, f"readers of {self.name} to finish"):
            pass_fence(f"publishing {self.name}")  # fw_assets.lib.fence: a run no longer live stops here
            _write_durably(self.path / JOURNAL, json.dumps(journal, indent=1))
            (self.path / "replaced").mkdir()
            try:
                _apply(journal["moves"])
            except BaseException as error:
                _roll_back(journal["moves"])
                (self.path / JOURNAL).unlink()
                if isinstance(error, OSError):
                    raise PublishError(_publish_failure(self, error)) from error
                raise
            (self.path / JOURNAL).unlink()
        return record

    def _record(
        self, moves: Mapping[Path, Path | None], contents: Mapping[str, Any], inputs: Mapping[str, Mapping[str, Any]]
    ) -> dict:
        files, staged_files = {}, []
        for target, staged in moves.items():
            if staged is None:
                continue
            for path in sorted(staged.rglob("*")) if staged.is_dir() else [staged]:
                if path.is_file():
                    published = target / path.relative_to(staged) if staged.is_dir() else target
                    link = checksums.linked_file(path)
                    entry = file_entry(path.stat().st_size, checksums.staged_checksum(path),
                                       str(link.relative_to(self.output_root)) if link else None)
                    files[str(published.relative_to(self.output_root))] = entry
                    staged_files.append(path)
        checksums.forget(staged_files)
        return sealed({
            "format": RECORD_FORMAT,
            "name": self.name,
            "dump": self.dump,
            "generation": self.generation,
            "published_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "code_version": self.code_version,
            "files": files,
            "contents": dict(contents),
            "inputs": {name: dict(entry) for name, entry in sorted(inputs.items())},
        })

    def discard(self) -> None:
        """Delete the staging folder, unless its journal says a rollback is owed (see recover_dump)."""
        if not (self.path / JOURNAL).exists():
            shutil.rmtree(self.path, ignore_errors=True)


def _publish_failure(staging: Staging, error: OSError) -> str:
    where = f"{error.filename} -> {error.filename2}" if error.filename2 else error.filename
    undone = "Every rename already done was undone: the previous output is published unchanged."
    told = f"Dump {staging.dump}: could not publish {staging.name}: {error.strerror} ({where})."
    if error.errno != errno.EXDEV:
        return f"{told} {undone} Fix the permissions of that folder and run it again."
    staged_in = staging_root(staging.output_root)
    outside = next(Path(f) for f in (error.filename, error.filename2) if f and not Path(f).is_relative_to(staged_in))
    mount = _mount_point(outside)
    read_only = " and read-only" if os.statvfs(mount).f_flag & os.ST_RDONLY else ""
    return (
        f"{told} {mount} is on a mount of its own{read_only} (a bind mount, or another disk): publishing "
        f"moves files by rename, which cannot cross mounts, so every output folder must be on the same mount "
        f"as {staged_in}{' and writable' if read_only else ''}. {undone} Mount {mount} "
        f"{'read-write and ' if read_only else ''}not separately (or set FW_OUTPUT_DIR to a folder on one mount), "
        "then run it again."
    )


def _mount_point(path: Path) -> Path:
    """The mount point `path` is on: the longest of the process's mount points holding it (a bind
    mount of a folder of the same filesystem counts; `os.path.ismount` does not see those)."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        points = [Path(line.split()[4].replace("\\040", " ")) for line in mounts]
    except OSError:  # not Linux: the nearest folder on another device
        points = [p for p in (path, *path.parents) if p.exists() and os.path.ismount(p)]
    return max((p for p in points if path.is_relative_to(p)), key=lambda p: len(p.parts), default=Path("/"))


def _apply(moves: list[dict]) -> None:
    for move in moves:
        target, aside = Path(move["target"]), Path(move["aside"])
        if target.exists() or target.is_symlink():
            os.rename(target, aside)
        if move["staged"]:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(move["staged"], target)


def _roll_back(moves: list[dict]) -> None:
    """Undo whatever part of `_apply` was done, in reverse; safe to run again after a kill."""
    for move in reversed(moves):
        target, aside = Path(move["target"]), Path(move["aside"])
        staged = Path(move["staged"]) if move["staged"] else None
        if staged is not None and not staged.exists() and (target.exists() or target.is_symlink()):
            os.rename(target, staged)  # this move was done: take the new copy back out
        if aside.exists() or aside.is_symlink():
            os.rename(aside, target)


def _pending_journals(output_root: Path) -> Iterator[tuple[Path, dict]]:
    root = staging_root(output_root)
    for journal in sorted(root.glob(f"*/{JOURNAL}")) if root.is_dir() else []:
        try:
            yield journal, json.loads(journal.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            continue  # finished meanwhile, or written by a run killed before fsync (nothing moved)


def recover_dump(output_root: Path, dump: str, log: Log | None = None) -> list[str]:
    """Roll back every publication of an output of `dump` that a dead process left half done.

    Returns the names rolled back. A live writer holds its name's lock while it has a journal,
    so a journal found under that lock belongs to a dead process."""
    rolled_back = []
    for journal_path, journal in _pending_journals(output_root):
        if journal.get("dump") != dump:
            continue
        name = journal["name"]
        with _flock(_lock_path(output_root, name), fcntl.LOCK_EX, log, f"the publication of {name}"):
            if not journal_path.exists():
                continue  # its writer was alive and finished
            _roll_back(journal["moves"])
            journal_path.unlink()
            shutil.rmtree(journal_path.parent, ignore_errors=True)
        rolled_back.append(name)
        if log:
            log(f"Rolled back the publication of {name} that a killed run left half done.")
    return rolled_back


def _delete_abandoned_staging(output_root: Path, name: str) -> None:
    """Staging folders of `name` without a journal: a run died before publishing. Only the holder
    of `name`'s write lock may call this (another writer's folder would be in use)."""
    root = staging_root(output_root)
    for leftover in sorted(root.glob(f"{name}.*")) if root.is_dir() else []:
        if leftover.name.rpartition(".")[0] == name and not (leftover / JOURNAL).exists():
            shutil.rmtree(leftover, ignore_errors=True)


@contextmanager
def staged_publication(
    output_root: Path, name: str, dump: str, log: Log | None = None, *, code_version: str
) -> Iterator[Staging]:
    """Be the only writer of `name`, repair what killed runs left for `dump`, and stage a new
    publication by code of `code_version`. Whatever the body does not publish is deleted on the way
    out, also when it raises."""
    write_lock = _lock_path(output_root, name, ".write")
    with _flock(write_lock, fcntl.LOCK_EX, log, f"another run writing {name}"):
        recover_dump(output_root, dump, log)
        _delete_abandoned_staging(output_root, name)
        staging = Staging(output_root, name, dump, code_version, log)
        try:
            yield staging
        finally:
            staging.discard()


@contextmanager
def published_generation(
    output_root: Path, name: str, dump: str, log: Log | None = None, verified: FileSelection = no_file
) -> Iterator[dict | None]:
    """The generation record of `name`, an output of `dump` (None if it was never published), held
    still while the body reads: no publication of `name` can replace it meanwhile. The record is
    refused (RecordRefused) unless it is one of `name` and `dump`; every file it lists is checked to
    be there with its recorded size, and those `verified` selects to hold their recorded checksum
    (PublishedOutputChanged)."""
    while True:
        recover_dump(output_root, dump, log)
        with _flock(_lock_path(output_root, name), fcntl.LOCK_SH, log, f"the publication of {name}"):
            if any(j.get("name") == name for _, j in _pending_journals(output_root)):
                continue  # a writer died between our recovery and our lock: recover again
            record = recorded_generation(output_root, name)
            if record is not None:
                if record["dump"] != dump:
                    raise RecordRefused(name, generation_record_path(output_root, name),
                                        f"it is a record of {record['dump']}, not of {dump}")
                if problems := changed_files(output_root, record, verified):
                    raise PublishedOutputChanged(name, record, problems)
            yield record
            return


def changed_files(output_root: Path, record: dict, verified: FileSelection = every_file) -> list[str]:
    """How the published files differ from what `record` lists, one line each ([] when none): a file
    missing or of another size, or, among those `verified` selects, of other bytes than its checksum
    (each re-read whole; a hard link still one file with the file it links is that file's record's
    to verify, not read again here)."""
    changed = []
    for relative, entry in record["files"].items():
        published = output_root / relative
        if not published.is_file():
            changed.append(f"{relative} is missing")
        elif (size := published.stat().st_size) != entry["size"]:
            changed.append(f"{relative} has {size:,} bytes, not {entry['size']:,}")
        elif verified(relative) and not _linked(output_root, published, entry) and (
            checksums.file_checksum(published) != entry[ALGORITHM]
        ):
            changed.append(f"{relative} has other bytes than were published ({ALGORITHM} differs)")
    return changed


def _linked(output_root: Path, published: Path, entry: dict) -> bool:
    """Whether a published file is still one file with the other publication's file it links."""
    return LINK_OF in entry and checksums.same_file(published, output_root / entry[LINK_OF])


def input_entry(record: dict | None, **identity: Any) -> dict:
    """What a reader records of one input it read, from the input's generation record (None: not
    published when read): its generation, its content version if it has one, and `identity`."""
    if record is None:
        return {"generation": None, **identity}
    version = record["contents"].get("content_version")
    return {"generation": record["generation"], **({"content_version": version} if version else {}), **identity}


def data_version(record: dict) -> str:
    """A publication's version as readers compare it (and Dagster's UI, as its data version): its
    content version when it has one, else its generation."""
    return record["contents"].get("content_version") or record["generation"]


@dataclass(frozen=True)
class ChangedInput:
    """An input replaced since an output was made from it."""

    name: str
    recorded: str | None  # the generation the output was made from (None: not published then)
    published: str | None  # the generation published now (None: none)


def changed_inputs(output_root: Path, record: dict) -> list[ChangedInput]:
    """Each publication among `record`'s inputs whose published generation is not the one recorded
    (nor one of the same content version). Inputs that are not publications (no `generation`, e.g.
    source files) are not compared here."""
    changed = []
    for name, entry in record["inputs"].items():
        if "generation" not in entry:
            continue
        now = recorded_generation(output_root, name)
        if not _same_input(entry, now):
            changed.append(ChangedInput(name, entry["generation"], now["generation"] if now else None))
    return changed


def _same_input(entry: Mapping[str, Any], now: dict | None) -> bool:
    if now is None or entry["generation"] is None:
        return now is None and entry["generation"] is None
    if entry["generation"] == now["generation"]:
        return True
    version = entry.get("content_version")
    return version is not None and version == now["contents"].get("content_version")


def recorded_generation(output_root: Path, name: str) -> dict | None:
    """The generation record of `name` as it is on disk (None if never published), checked against
    the schema (RecordRefused: fw_assets.lib.generation_record) but not against its files: for
    comparing generations, not for reading the output. A link is refused: records are files the
    pipeline renames into place."""
    path = generation_record_path(output_root, name)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
        raise RecordRefused(name, path, f"a link to {os.readlink(path)}, not a record the pipeline wrote") from None
    with open(descriptor, "rb") as stream:
        text = stream.read()
    return parse_record(path, name, text)


def trusted_record(output_root: Path, name: str) -> dict | None:
    """The generation record of `name` if it is published and passes its schema, else None: for
    estimates made before a step reads its inputs (the reading refuses a record it cannot trust)."""
    try:
        return recorded_generation(output_root, name)
    except RecordRefused:
        return None


def _write_durably(path: Path, text: str) -> None:
    """Write `path` whole or not at all: a half-written journal must never be found."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(partial, path)
