"""Arrow IPC files whose record batches each carry an xxh3 digest of their buffers, read in place.

A later dump's decisions read the sorted band keys and the signatures of every earlier dump, but
use only the rows that share a key. Memory-mapped Arrow needs no decoding or copying (the parquet
reads cost 2-3 times the merge itself, BENCHMARKS.md), and the digests (xxh3, ~15 GB/s) still
catch a damaged byte anywhere, which Arrow IPC alone would not.
"""

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import xxhash

DIGEST_KEY = b"fw_assets.xxh3_64"


class CheckedArrowWriter:
    """Writes tables to an Arrow IPC file, one record batch each, with their digests."""

    def __init__(self, path: Path, schema: pa.Schema):
        self._schema = schema
        self._writer = pa.ipc.new_file(str(path), schema)

    def write(self, table: pa.Table) -> None:
        for batch in table.cast(self._schema).combine_chunks().to_batches():
            # the batch as a reader will see it (offsets rebased, padding), so the digests agree
            stored = pa.ipc.read_record_batch(batch.serialize(), self._schema)
            self._writer.write_batch(stored, custom_metadata={DIGEST_KEY: _digest(stored)})

    def __enter__(self) -> "CheckedArrowWriter":
        return self

    def __exit__(self, *exc) -> None:
        self._writer.close()


def write_checked_arrow(path: Path, schema: pa.Schema, tables: Iterable[pa.Table]) -> None:
    with CheckedArrowWriter(path, schema) as writer:
        for table in tables:
            writer.write(table)


def read_checked_arrow(path: Path) -> pa.Table:
    """The file's table, memory-mapped; raises ValueError naming the file and the record batch
    if a batch's buffers do not match their digest, or the file is not a readable Arrow file."""
    try:
        reader = pa.ipc.open_file(pa.memory_map(str(path)))
        batches = []
        for i in range(reader.num_record_batches):
            batch, metadata = reader.get_batch_with_custom_metadata(i)
            expected = (metadata or {}).get(DIGEST_KEY)
            if expected is None or _digest(batch).encode() != expected:
                raise ValueError(f"record batch {i} does not match its xxh3 digest: the file is damaged")
            batches.append(batch)
    except (OSError, pa.ArrowException) as error:
        raise ValueError(f"{path}: not a readable Arrow file ({error})") from error
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error
    return pa.Table.from_batches(batches, reader.schema)


def read_arrow_schema(path: Path) -> pa.Schema:
    """The schema of an Arrow IPC file, from its footer."""
    return pa.ipc.open_file(pa.memory_map(str(path))).schema


def _digest(batch: pa.RecordBatch) -> str:
    digest = xxhash.xxh3_64()
    for column in batch.columns:
        for buffer in column.buffers():
            if buffer is not None:
                digest.update(buffer)
    return digest.hexdigest()
