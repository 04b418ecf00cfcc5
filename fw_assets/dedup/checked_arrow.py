"""Arrow IPC files whose record batches carry an xxh3 digest of each column's buffers, read in place.

A later dump's decisions read the sorted band keys and the signatures of every earlier dump, but
use only the rows that share a key. Memory-mapped Arrow needs no decoding or copying (the parquet
reads cost 2-3 times the merge itself, docs/benchmarks.md), and the digests (xxh3, ~20 GB/s) still
catch a damaged byte, which Arrow IPC alone would not. A digest per column, as parquet has a
checksum per page: a reader of some columns verifies (and maps) those only, e.g. the ids of a
signatures file without its signatures, five times their size.
"""

import mmap
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import xxhash

DIGEST_KEY_PREFIX = "fw_assets.xxh3_64."  # + the column's name


class CheckedArrowWriter:
    """Writes tables to an Arrow IPC file, one record batch each, with their digests."""

    def __init__(self, path: Path, schema: pa.Schema):
        self._schema = schema
        self._writer = pa.ipc.new_file(str(path), schema)

    def write(self, table: pa.Table) -> None:
        for batch in table.cast(self._schema).combine_chunks().to_batches():
            # the batch as a reader will see it (offsets rebased, padding), so the digests agree
            stored = pa.ipc.read_record_batch(batch.serialize(), self._schema)
            digests = {_digest_key(name): _digest(stored.column(name)) for name in stored.schema.names}
            self._writer.write_batch(stored, custom_metadata=digests)

    def __enter__(self) -> "CheckedArrowWriter":
        return self

    def __exit__(self, *exc) -> None:
        self._writer.close()


def write_checked_arrow(path: Path, schema: pa.Schema, tables: Iterable[pa.Table]) -> None:
    with CheckedArrowWriter(path, schema) as writer:
        for table in tables:
            writer.write(table)


def read_checked_arrow(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """The file's table (or its `columns`), memory-mapped; raises ValueError naming the file, the
    record batch and the column if a column read does not match its digest, or the file is not a
    readable Arrow file. Once verified, the file's pages are let go from this process's memory
    (they stay in the page cache): only those read again come back, a few of a file whose rows are
    taken here and there."""
    return CheckedArrow(path, columns).table


class CheckedArrow:
    """A checked Arrow IPC file: read_checked_arrow's table, and `let_go()`, which lets the pages
    read since go from this process's memory again (the table stays readable)."""

    def __init__(self, path: Path, columns: Sequence[str] | None = None) -> None:
        batches = CheckedBatches(path, columns)
        self.table = pa.Table.from_batches(list(batches), batches.schema)
        self._mapping = batches.mapping

    def let_go(self, arrays: Iterable[pa.Array] | None = None) -> None:
        """Let go of the pages of these arrays of the table (default: of the whole file): on a
        read-only file mapping MADV_DONTNEED only unmaps them (the page cache keeps them; a later
        read maps them again)."""
        if arrays is None:
            if len(self._mapping):
                self._mapping.madvise(mmap.MADV_DONTNEED)
            return
        for array in arrays:
            _let_go(self._mapping, array)


class CheckedBatches:
    """The file's record batches (their `columns`) one at a time, each verified before it is
    handed over (ValueError as read_checked_arrow's), memory-mapped; the pages of a batch are let
    go from this process's memory once the next batch is asked for, so that reading a file through
    costs one batch of memory, not the file."""

    def __init__(self, path: Path, columns: Sequence[str] | None = None) -> None:
        self.path = path
        try:
            with open(path, "rb") as file:
                self.mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
            self._reader = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(self.mapping)))
        except (OSError, ValueError, KeyError, pa.ArrowException) as error:
            raise ValueError(f"{path}: not a readable Arrow file ({error})") from error
        schema = self._reader.schema
        self._names = list(columns or schema.names)
        self.schema = pa.schema([schema.field(n) for n in self._names], schema.metadata)

    def count_rows(self) -> int:
        """The rows of the file, from its batches' headers (no data is read)."""
        return self._reader.count_rows()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for i in range(self._reader.num_record_batches):
            try:
                batch, metadata = self._reader.get_batch_with_custom_metadata(i)
                batch = batch.select(self._names)
            except (OSError, KeyError, pa.ArrowException) as error:
                raise ValueError(f"{self.path}: not a readable Arrow file ({error})") from error
            for name, column in zip(self._names, batch.columns):
                if (metadata or {}).get(_digest_key(name)) != _digest(column):
                    raise ValueError(
                        f"{self.path}: record batch {i}, column {name} does not match its xxh3 digest: "
                        "the file is damaged"
                    )
            yield batch
            for column in batch.columns:
                _let_go(self.mapping, column)


def _let_go(mapping: mmap.mmap, array: pa.Array) -> None:
    """MADV_DONTNEED over the pages of the array's buffers in `mapping` (see CheckedArrow.let_go)."""
    base = pa.py_buffer(mapping).address
    for buffer in array.buffers():
        if buffer is None or not buffer.size:
            continue
        start = (buffer.address - base) // mmap.PAGESIZE * mmap.PAGESIZE
        end = min(buffer.address - base + buffer.size, len(mapping))
        if 0 <= start < end:
            mapping.madvise(mmap.MADV_DONTNEED, start, end - start)


def read_arrow_schema(path: Path) -> pa.Schema:
    """The schema of an Arrow IPC file, from its footer."""
    return pa.ipc.open_file(pa.memory_map(str(path))).schema


def _digest_key(column: str) -> bytes:
    return f"{DIGEST_KEY_PREFIX}{column}".encode()


def _digest(column: pa.Array) -> bytes:
    digest = xxhash.xxh3_64()
    for buffer in column.buffers():
        if buffer is not None:
            digest.update(buffer)
    return digest.hexdigest().encode()
