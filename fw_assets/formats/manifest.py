"""What a dump's source files are, from their parquet footers alone (no data is read)."""

from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq


@dataclass(frozen=True)
class SourceFile:
    path: str
    bytes: int
    mtime: float
    rows: int
    schema: dict[str, str]


def is_apple_double(path: Path) -> bool:
    """A `._name` file macOS writes beside a file copied to a foreign disk: metadata, not data."""
    return path.name.startswith("._")


def source_files(dump_dir: Path) -> list[Path]:
    """The dump's parquet files in name order (Hugging Face names sort in shard order). A symbolic
    link is listed even when its target is missing (a Hugging Face cache with a missing blob), so
    it is refused rather than skipped; macOS AppleDouble files are not listed."""
    return sorted(
        p
        for p in dump_dir.glob("*.parquet")
        if (p.is_file() or p.is_symlink()) and not is_apple_double(p)
    )


def apple_double_files(dump_dir: Path) -> list[str]:
    """Names of the AppleDouble `._*.parquet` files in the folder (ignored, with a warning)."""
    return sorted(p.name for p in dump_dir.glob("._*.parquet"))


def describe(path: Path) -> SourceFile:
    """Size, mtime, row count and arrow schema of one parquet file, read from its footer."""
    stat = path.stat()
    metadata = pq.read_metadata(path)
    schema = metadata.schema.to_arrow_schema()
    return SourceFile(
        path=str(path),
        bytes=stat.st_size,
        mtime=stat.st_mtime,
        rows=metadata.num_rows,
        schema={field.name: str(field.type) for field in schema},
    )


def as_records(files: list[SourceFile]) -> list[dict]:
    return [asdict(f) for f in files]
