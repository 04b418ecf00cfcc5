"""`<prefix>.docs.parquet` beside each `.bin`/`.idx` pair: which FineWeb-Edu document each token
sequence came from.

One row per document, in `.idx` order: `document_index` (int64, 0..N-1, the sequence number in
the `.idx`), `id` (the source document's id) and `token_count` (int32, its tokens including the
end-of-document token: the `.idx` sequence length).
"""

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.lib.writers import FixedRowGroups, KeepOnSuccess
from fw_assets.paths import docs_path

SCHEMA = pa.schema(
    [("document_index", pa.int64()), ("id", pa.string()), ("token_count", pa.int32())]
)
# Row groups of a fixed size, whatever batches the rows arrive in: the file's bytes depend only
# on its rows.
ROW_GROUP_ROWS = 1 << 17


class DocumentIndexWriter(KeepOnSuccess):
    """Streams (id, token count) rows into `<prefix>.docs.parquet`, numbering documents from 0."""

    def __init__(self, prefix: Path) -> None:
        self.path = docs_path(prefix)
        self.document_count = 0
        self._rows = FixedRowGroups(self.path, SCHEMA, ROW_GROUP_ROWS, compression="zstd")

    def add(self, ids: pa.Array, token_counts: np.ndarray) -> None:
        """The next documents: their source ids and token counts, in `.idx` order."""
        start = self.document_count
        self._rows.write(
            pa.table(
                [
                    pa.array(np.arange(start, start + len(ids), dtype=np.int64)),
                    ids.cast(pa.string()),
                    pa.array(np.asarray(token_counts, dtype=np.int32)),
                ],
                schema=SCHEMA,
            )
        )
        self.document_count += len(ids)

    def finish(self) -> None:
        self._rows.finish()

    def abort(self) -> None:
        self._rows.abort()


def read_document_index(prefix: Path, columns: list[str] | None = None) -> pa.Table:
    """The whole `<prefix>.docs.parquet` (small: tens of bytes per document), or its `columns`."""
    return pq.read_table(docs_path(prefix), schema=SCHEMA, columns=columns)


def document_ids(prefix: Path) -> Iterator[pa.Array]:
    """The `id` column of `<prefix>.docs.parquet`, a row group at a time (memory for one)."""
    for batch in pq.ParquetFile(docs_path(prefix)).iter_batches(ROW_GROUP_ROWS, columns=["id"]):
        yield batch.column(0)


def ids_at(prefix: Path, positions: np.ndarray) -> pa.Array:
    """The ids of the documents at `positions` (sequence numbers, in the order given), reading only
    the row groups that hold them: memory for one row group and the ids asked for."""
    parquet = pq.ParquetFile(docs_path(prefix), pre_buffer=False)
    sizes = [parquet.metadata.row_group(group).num_rows for group in range(parquet.num_row_groups)]
    starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    positions = np.asarray(positions, dtype=np.int64)
    if len(positions) and (positions.min() < 0 or positions.max() >= starts[-1]):
        raise IndexError(f"{docs_path(prefix)} has {starts[-1]:,} documents, asked for document "
                         f"{int(positions.min() if positions.min() < 0 else positions.max()):,}")
    group_of = np.searchsorted(starts, positions, side="right") - 1
    pieces, placed = [pa.array([], pa.string())], [np.zeros(0, np.int64)]
    for group in np.unique(group_of).tolist():
        mine = np.flatnonzero(group_of == group)
        ids = parquet.read_row_group(group, columns=["id"]).column(0).combine_chunks()
        pieces.append(ids.take(pa.array(positions[mine] - starts[group])))
        placed.append(mine)
    return pa.concat_arrays(pieces).take(pa.array(np.argsort(np.concatenate(placed), kind="stable")))


def document_count(prefix: Path) -> int:
    """The rows of `<prefix>.docs.parquet`, from its footer."""
    return pq.read_metadata(docs_path(prefix)).num_rows
