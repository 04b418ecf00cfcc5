"""Parquet files written in row groups of a fixed size, whatever the sizes of the batches fed in,
so that the bytes depend on the rows alone (not on how a reader or DuckDB chunked them)."""

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def write_in_row_groups(
    path: Path,
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    rows: int,
    compression: str = "zstd",
) -> int:
    """Write `batches` (cast to `schema`) to `path` as parquet; returns the rows written."""
    pending: list[pa.RecordBatch] = []
    written = 0
    with pq.ParquetWriter(path, schema, compression=compression, write_page_checksum=True) as writer:
        for batch in batches:
            pending.append(batch.cast(schema))
            table = pa.Table.from_batches(pending, schema)
            full = table.num_rows // rows * rows
            if full:
                writer.write_table(table.slice(0, full), row_group_size=rows)
                pending = table.slice(full).to_batches()
                written += full
        tail = pa.Table.from_batches(pending, schema)
        if tail.num_rows:
            writer.write_table(tail, row_group_size=rows)
    return written + tail.num_rows
