"""Writers used as context managers keep their file only when the block succeeds."""

from pathlib import Path
from types import TracebackType

import pyarrow as pa
import pyarrow.parquet as pq


class KeepOnSuccess:
    """`with writer:` calls `finish()` when the block completes and `abort()` when it raises."""

    def finish(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()


class FixedRowGroups(KeepOnSuccess):
    """Streams tables into one parquet file in row groups of exactly `rows` rows (the last one
    shorter), whatever sizes the tables arrive in: the file's bytes depend only on its rows."""

    def __init__(self, path: Path, schema: pa.Schema, rows: int, **options) -> None:
        self.path, self.schema, self.rows = path, schema, rows
        self._writer = pq.ParquetWriter(path, schema, **options)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0

    def write(self, table: pa.Table) -> None:
        self._pending.append(table)
        self._pending_rows += table.num_rows
        if self._pending_rows >= self.rows:
            self._flush(whole_groups_only=True)

    def _flush(self, whole_groups_only: bool) -> None:
        table = pa.concat_tables(self._pending) if self._pending else self.schema.empty_table()
        rows = table.num_rows - table.num_rows % self.rows if whole_groups_only else table.num_rows
        if rows:
            # one chunk per write: page boundaries would otherwise follow the incoming tables
            self._writer.write_table(table.slice(0, rows).combine_chunks(), row_group_size=self.rows)
        self._pending = [table.slice(rows)]
        self._pending_rows = table.num_rows - rows

    def finish(self) -> None:
        """Write what is pending and the footer; the file is complete only after this."""
        self._flush(whole_groups_only=False)
        self._writer.close()

    def abort(self) -> None:
        """Close and delete the partial file."""
        self._writer.close()
        self.path.unlink(missing_ok=True)
