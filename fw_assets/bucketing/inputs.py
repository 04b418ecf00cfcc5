"""A dump's source files, found and described with errors that name the dump and the file."""

import os
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from fw_assets.bucketing.raw_contract import RAW_SCHEMA
from fw_assets.contracts.findings import Violation, rejection_message
from fw_assets.formats.dump_files import scan_dump_folder, shard_set_gaps
from fw_assets.formats.manifest import SourceFile, apple_double_files, describe, source_files
from fw_assets.paths import source_dump_dir


@dataclass(frozen=True)
class DumpSource:
    dump: str
    folder: Path
    files: tuple[SourceFile, ...]
    ignored: tuple[str, ...] = ()  # macOS AppleDouble `._*.parquet` files: not data

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def fingerprint(self) -> str:
        """The files' names, sizes and mtimes as the `new_dumps` sensor fingerprints them: the
        identity of the source an output was made from (raw's data version)."""
        return scan_dump_folder(self.dump, self.folder).fingerprint

    def as_input(self) -> dict:
        """What a generation record says of the source it was made from (not a publication)."""
        return {f"source-{self.dump}": {"folder": str(self.folder), "fingerprint": self.fingerprint()}}


def find_dump_source(dump: str, folder: Path) -> tuple[DumpSource, list[Violation]]:
    """Every readable parquet file of the dump with its footer facts, and what is wrong with the
    rest: a missing folder, a folder with no parquet files, an incomplete `train-*-of-N` set, a link
    to a missing file, a file whose footer cannot be read."""
    if not folder.is_dir():
        return DumpSource(dump, folder, ()), [
            Violation("folder_missing", None, 0, f"no source folder at {folder}")
        ]
    paths = source_files(folder)
    if not paths:
        return DumpSource(dump, folder, ()), [
            Violation("no_files", None, 0, f"{folder} holds no *.parquet files")
        ]
    files, problems = [], []
    gaps = shard_set_gaps([p.name for p in paths])
    if gaps:
        problem = f"the download is incomplete: {gaps}; download them"
        problems.append(Violation("shard_set_incomplete", None, 0, problem))
    for path in paths:
        if not path.exists():
            problem = f"is a link to {os.readlink(path)}, which does not exist; re-download it"
            problems.append(Violation("file_missing", None, 0, problem, file=path.name))
            continue
        try:
            files.append(describe(path))
        except Exception as error:  # pyarrow raises several types for a damaged footer
            problems.append(
                Violation(
                    "file_unreadable",
                    None,
                    0,
                    f"is not a readable parquet file ({error}); re-download it",
                    file=path.name,
                )
            )
    return DumpSource(dump, folder, tuple(files), tuple(apple_double_files(folder))), problems


def read_dump_source(dump: str, source_root: Path) -> DumpSource:
    """Every parquet file of the dump in the snapshot; a missing, empty or unreadable dump fails."""
    folder = source_dump_dir(source_root, dump)
    source, problems = find_dump_source(dump, folder)
    if problems:
        raise dg.Failure(
            rejection_message(dump, "source", [RAW_SCHEMA.outcome(problems)]),
            metadata={"folder": dg.MetadataValue.path(str(folder))},
        )
    return source
