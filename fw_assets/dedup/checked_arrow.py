"""Arrow IPC files whose record batches carry an xxh3 digest of each column's buffers, read in place.

A later dump's decisions read the sorted band keys and the signatures of every earlier dump, but
use only the rows that share a key. Memory-mapped Arrow needs no decoding or copying (the parquet
reads cost 2-3 times the merge itself, BENCHMARKS.md), and the digests (xxh3, ~20 GB/s) still
catch a damaged byte, which Arrow IPC alone would not. A digest per column, as parquet has a
checksum per page: a reader of some columns verifies (and maps) those only, e.g. the ids of a
signatures file without its signatures, five times their size.
"""

from collections.abc import Iterable, Sequence
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
    readable Arrow file."""
    try:
        reader = pa.ipc.open_file(pa.memory_map(str(path)))
        names = list(columns or reader.schema.names)
        batches = []
        for i in range(reader.num_record_batches):
            batch, metadata = reader.get_batch_with_custom_metadata(i)
            batch = batch.select(names)
            for name, column in zip(names, batch.columns):
                if (metadata or {}).get(_digest_key(name)) != _digest(column):
                    raise ValueError(
                        f"record batch {i}, column {name} does not match its xxh3 digest: the file is damaged"
                    )
            batches.append(batch)
        schema = reader.schema
    except (OSError, KeyError, pa.ArrowException) as error:
        raise ValueError(f"{path}: not a readable Arrow file ({error})") from error
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error
    return pa.Table.from_batches(batches, pa.schema([schema.field(n) for n in names], schema.metadata))


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
