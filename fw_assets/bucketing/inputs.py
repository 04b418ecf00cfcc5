"""A dump's source files, found and described with errors that name the dump and the file."""

from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from fw_assets.lib.manifest import SourceFile, describe, source_files


@dataclass(frozen=True)
class DumpSource:
    dump: str
    folder: Path
    files: tuple[SourceFile, ...]

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)


def read_dump_source(dump: str, folder: Path) -> DumpSource:
    """Every parquet file of the dump with its footer facts; a missing, empty or unreadable dump fails."""
    if not folder.is_dir():
        raise dg.Failure(f"Dump {dump}: no source folder at {folder}.")
    paths = source_files(folder)
    if not paths:
        raise dg.Failure(f"Dump {dump}: {folder} holds no *.parquet files.")
    files = []
    for path in paths:
        try:
            files.append(describe(path))
        except Exception as error:  # pyarrow raises several types for a damaged footer
            raise dg.Failure(
                f"Dump {dump}: file {path} is not a readable parquet file ({error}). "
                "Re-download it; nothing was published."
            ) from error
    return DumpSource(dump=dump, folder=folder, files=tuple(files))
