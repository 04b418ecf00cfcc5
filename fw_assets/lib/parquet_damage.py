"""Where a parquet file that DuckDB could not read is damaged. DuckDB's errors about a damaged page
name neither the file nor the row group; Arrow, reading one row group at a time, can tell both."""

from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def damaged_row_group(paths: Iterable[Path], columns: Sequence[str], what: str = "file") -> str | None:
    """Says which of `paths` is damaged and where (its footer, or the first row group whose
    `columns` cannot be read), as "the <what> <path> is damaged: ..."; None when all read whole."""
    for path in paths:
        try:
            parquet = pq.ParquetFile(path)
        except (OSError, pa.ArrowException) as error:
            return f"the {what} {path} is damaged: its footer cannot be read ({error})"
        groups = parquet.metadata.num_row_groups
        for group in range(groups):
            try:
                parquet.read_row_group(group, columns=list(columns))
            except (OSError, pa.ArrowException) as error:
                return f"the {what} {path} is damaged: row group {group} (of {groups}) cannot be read ({error})"
    return None
