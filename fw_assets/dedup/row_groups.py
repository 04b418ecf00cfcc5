"""Files written in row groups (parquet) or record batches (Arrow) of a fixed size, whatever the
sizes of the batches fed in, so that the bytes depend on the rows alone (not on how a reader or
DuckDB chunked them)."""

from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def in_row_groups(batches: Iterable[pa.RecordBatch], schema: pa.Schema, rows: int) -> Iterator[pa.Table]:
    """`batches` (cast to `schema`) regrouped into tables of `rows` rows, the last one shorter."""
    pending: list[pa.RecordBatch] = []
    for batch in batches:
        pending.append(batch.cast(schema))
        table = pa.Table.from_batches(pending, schema)
        full = table.num_rows // rows * rows
        for start in range(0, full, rows):
            yield table.slice(start, rows)
        pending = table.slice(full).to_batches()
    tail = pa.Table.from_batches(pending, schema)
    if tail.num_rows:
        yield tail


def parquet_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """A zstd parquet writer whose pages carry checksums (the decisions verify them on reading)."""
    return pq.ParquetWriter(path, schema, compression="zstd", write_page_checksum=True)


def write_in_row_groups(
    path: Path,
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    rows: int,
) -> int:
    """Write `batches` (cast to `schema`) to `path` as parquet; returns the rows written."""
    written = 0
    with parquet_writer(path, schema) as writer:
        for table in in_row_groups(batches, schema, rows):
            writer.write_table(table, row_group_size=rows)
            written += table.num_rows
    return written
