"""A dump's band keys sorted by key (`<dump>.keys.arrow` beside its minhash file).

Deciding a dump reads the band keys of every earlier dump. Each earlier file is probed against
an index of the dump's own keys (KeyIndex) in one compiled pass over its flat uint64 column: no
hash table rebuilt per earlier dump, no list column unnested. The file is checksummed Arrow,
memory-mapped: an earlier dump costs about that pass, not the decoding of its 12 bytes a key
(the key and its row in the minhash file). Sorted, the keys are probed in order, so both tables
of the index are walked front to back, as a merge would walk the keys.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from fw_assets.dedup.checked_arrow import CheckedBatches, write_checked_arrow
from fw_assets.dedup.row_groups import in_row_groups
from fw_assets.lib.compiled import compiled_lazily, pack_pairs, unpack_pairs
from fw_assets.lib.sql import load_sql

SORTED_KEYS_SCHEMA = pa.schema([("key", pa.uint64()), ("row", pa.uint32())])
BATCH_ROWS = 1 << 20


def write_sorted_keys(
    con: duckdb.DuckDBPyConnection, minhash: Path, output: Path, metadata: dict[bytes, bytes]
) -> None:
    """Every band key of the minhash file with its row there, ordered by (key, row); DuckDB sorts
    (spilling past its memory limit). Written in record batches of BATCH_ROWS whatever the size of
    the chunks DuckDB hands over (not promised), so that the file's bytes depend on the keys
    alone."""
    relation = con.sql(load_sql("dedup_sorted_keys"), params={"path": str(minhash)})
    schema = SORTED_KEYS_SCHEMA.with_metadata(metadata)
    batches = relation.to_arrow_reader(BATCH_ROWS)
    write_checked_arrow(output, schema, in_row_groups(batches, schema, BATCH_ROWS))


def read_sorted_keys(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(keys, rows) of a sorted keys file as two contiguous arrays, its digests verified; filled a
    record batch at a time, so that memory is the two arrays and one batch of the file."""
    batches = CheckedBatches(path)
    keys, rows = np.empty(batches.count_rows(), np.uint64), np.empty(batches.count_rows(), np.uint32)
    at = 0
    for batch in batches:
        keys[at: at + batch.num_rows] = batch.column(0).to_numpy()
        rows[at: at + batch.num_rows] = batch.column(1).to_numpy()
        at += batch.num_rows
    return keys, rows


@dataclass(frozen=True)
class KeyIndex:
    """The dump's own sorted keys with two tables over their top bits, built once per decision:
    `present`, a bitmap of about 16 bits a key (a key whose bit is clear is not there: ~94 % of an
    earlier dump's keys are ruled out by one bit test), and `starts`, where the keys of each bucket
    of the top `bucket_bits` begin (about one key a bucket). An earlier dump's sorted keys are then
    probed in one pass whose steps do not depend on each other, unlike a merge's (docs/benchmarks.md)."""

    keys: np.ndarray
    rows: np.ndarray
    present: np.ndarray
    starts: np.ndarray
    bucket_bits: int

    @property
    def present_bits(self) -> int:
        return self.bucket_bits + 4


def key_index(keys: np.ndarray, rows: np.ndarray) -> KeyIndex:
    bucket_bits = min(max(len(keys).bit_length() - 1, 1), 40)
    present = np.zeros(1 << (bucket_bits + 1), np.uint8)  # 2^(bucket_bits + 4) bits
    # a bucket's start is a position among the keys: 4 bytes while they are fewer than 2^31
    starts = np.zeros((1 << bucket_bits) + 1, np.int32 if len(keys) < 2**31 else np.int64)
    _build(keys, np.uint64(64 - bucket_bits - 4), np.uint64(64 - bucket_bits), present, starts)
    return KeyIndex(keys, rows, present, starts, bucket_bits)


@compiled_lazily
def _build(keys, present_shift, bucket_shift, present, starts):  # pragma: no cover
    """Each key's bit set in `present`; `starts` counted per bucket, then summed into where each
    bucket's keys begin."""
    for key in keys:
        bit = key >> present_shift
        present[bit >> np.uint64(3)] |= np.uint8(1) << np.uint8(bit & np.uint64(7))
        starts[(key >> bucket_shift) + np.uint64(1)] += 1
    for bucket in range(1, len(starts)):
        starts[bucket] += starts[bucket - 1]


@compiled_lazily
def _probe(
    keys, rows, present, starts, present_shift, bucket_shift, other_keys, other_rows, out, out_other
):  # pragma: no cover
    """Every pair of rows under an equal key is counted, and written to the outputs while they
    have room."""
    n = 0
    room = len(out)
    for j in range(len(other_keys)):
        key = other_keys[j]
        bit = key >> present_shift
        if (present[bit >> np.uint64(3)] >> np.uint8(bit & np.uint64(7))) & np.uint8(1):
            bucket = key >> bucket_shift
            for i in range(starts[bucket], starts[bucket + np.uint64(1)]):
                if keys[i] == key:
                    if n < room:
                        out[n] = rows[i]
                        out_other[n] = other_rows[j]
                    n += 1
    return n


def matching_rows(index: KeyIndex, other: Iterable[pa.RecordBatch]) -> tuple[np.ndarray, np.ndarray]:
    """(own row, other row) of every distinct pair sharing at least one key, ordered; `other` is
    a sorted keys file's record batches, probed one at a time (in place, no copy)."""
    # uint64 throughout, as pack_pairs returns: concatenating int64 with uint64 would give float64.
    pairs = [np.empty(0, np.uint64)]
    for batch in other:
        pairs.append(_probed_pairs(index, batch.column(0).to_numpy(), batch.column(1).to_numpy()))
    return unpack_pairs(np.unique(np.concatenate(pairs)))


def _probed_pairs(index: KeyIndex, keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """own row << 32 | other row (uint64) of every pair of rows under an equal key: one number a
    pair, so that np.unique finds the distinct pairs, ordered, in one sort. Rows are below 2^32
    (a row of a minhash file is a uint32, SORTED_KEYS_SCHEMA); pack_pairs refuses any other."""
    room = len(keys) // 8 + 1024  # one pass when under an eighth of the keys match
    out, out_other = np.empty(room, np.int64), np.empty(room, np.int64)
    shifts = np.uint64(64 - index.present_bits), np.uint64(64 - index.bucket_bits)
    arguments = (index.keys, index.rows, index.present, index.starts, *shifts, keys, rows)
    n = _probe(*arguments, out, out_other)
    if n > room:
        out, out_other = np.empty(n, np.int64), np.empty(n, np.int64)
        _probe(*arguments, out, out_other)
    return pack_pairs(out[:n], out_other[:n])
