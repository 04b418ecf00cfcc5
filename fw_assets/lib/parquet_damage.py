"""Where a parquet file that DuckDB could not read is damaged. DuckDB's errors about a damaged page
name neither the file nor the row group; Arrow, reading one row group at a time, can tell both."""

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq


class DamagedInput(RuntimeError):
    """A step's input file is damaged; the message names the file, the row group and what to do."""


# What reading a damaged parquet file raises, through DuckDB or Arrow
READ_ERRORS = (duckdb.Error, pa.ArrowException, OSError)


@contextmanager
def naming_damaged_row_groups(
    paths: Sequence[Path], columns: Sequence[str], what: str, where: str, remedy: str
) -> Iterator[None]:
    """Turn a read error of DuckDB's that a damaged row group of `paths` explains into a
    DamagedInput: "<where>: the <what> <path> is damaged: row group ... Nothing was published.
    <remedy>". Other errors pass as they are.

    DuckDB raises a damaged page as its own error while a query starts, and through Arrow's stream
    (an OSError without errno) once rows are streaming: both are looked into."""
    try:
        yield
    except READ_ERRORS as error:
        damage = damage_explaining(error, paths, columns, what)
        if damage is None:
            raise
        raise DamagedInput(f"{where}: {damage}. Nothing was published. {remedy}") from None


def damage_explaining(error: Exception, paths: Sequence[Path], columns: Sequence[str], what: str) -> str | None:
    """The damage of `paths` (see damaged_row_group) that explains a read `error`; None when the
    error is not the data's fault (memory, a full disk: an OSError with an errno)."""
    if isinstance(error, OSError) and error.errno is not None:
        return None
    return damaged_row_group(paths, columns, what)


def damaged_row_group(paths: Iterable[Path], columns: Sequence[str], what: str = "file") -> str | None:
    """Says which of `paths` is damaged and where (its footer, or the first row group whose
    `columns` cannot be read), as "the <what> <path> is damaged: ..."; None when all read whole."""
    for path in paths:
        try:
            parquet = pq.ParquetFile(path)
        except (OSError, pa.ArrowException) as error:
            return footer_damaged(what, path, error)
        groups = parquet.metadata.num_row_groups
        for group in range(groups):
            try:
                parquet.read_row_group(group, columns=list(columns))
            except (OSError, pa.ArrowException) as error:
                return row_group_damaged(what, path, group, groups, error)
    return None


def footer_damaged(what: str, path: Path, error: Exception) -> str:
    return f"the {what} {path} is damaged: its footer cannot be read ({error})"


def row_group_damaged(what: str, path: Path, group: int, groups: int, error: Exception) -> str:
    return f"the {what} {path} is damaged: row group {group} (of {groups}) cannot be read ({error})"
