"""A dump's band keys sorted by key (`<dump>.keys.arrow` beside its minhash file).

Deciding a dump reads the band keys of every earlier dump. Sorted, each earlier file is matched
against the dump's own sorted keys in one merge pass (numba) over two flat uint64 columns: no
hash table rebuilt per earlier dump, no list column unnested. The file is checksummed Arrow,
memory-mapped: an earlier dump costs about its merge, not the decoding of its 12 bytes a key
(the key and its row in the minhash file).
"""

from functools import cache
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from fw_assets.dedup.row_groups import in_row_groups
from fw_assets.lib.checked_arrow import read_checked_arrow, write_checked_arrow
from fw_assets.lib.sql import load_sql

SORTED_KEYS_SCHEMA = pa.schema([("key", pa.uint64()), ("row", pa.uint32())])
BATCH_ROWS = 1 << 20


def write_sorted_keys(
    con: duckdb.DuckDBPyConnection, minhash: Path, output: Path, metadata: dict[bytes, bytes]
) -> None:
    """Every band key of the minhash file with its row there, ordered by (key, row); DuckDB sorts
    (spilling past its memory limit)."""
    relation = con.sql(load_sql("dedup_sorted_keys"), params={"path": str(minhash)})
    schema = SORTED_KEYS_SCHEMA.with_metadata(metadata)
    batches = relation.to_arrow_reader(BATCH_ROWS)
    write_checked_arrow(output, schema, in_row_groups(batches, schema, BATCH_ROWS))


def read_sorted_keys(path: Path) -> pa.Table:
    """The (key, row) table of a sorted keys file, memory-mapped, its digests verified; a damaged
    or foreign file raises ValueError naming it."""
    table = read_checked_arrow(path)
    if not table.schema.remove_metadata().equals(SORTED_KEYS_SCHEMA):
        raise ValueError(f"{path}: columns {table.schema} differ from {SORTED_KEYS_SCHEMA}")
    return table


def key_arrays(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(keys, rows) of a sorted keys table as two contiguous arrays."""
    return table.column("key").to_numpy(), table.column("row").to_numpy()


@cache
def _compiled_merge():
    """The merge below compiled by numba, imported here so that loading the code location does not
    load LLVM (fw_assets_tests/test_structure.py)."""
    import numba

    return numba.njit(nogil=True, cache=True)(_merge)


def _merge(left_keys, left_rows, right_keys, right_rows, out_left, out_right):  # pragma: no cover
    """Walk both sorted key arrays once; every pair of rows under an equal key is counted, and
    written to the outputs while they have room."""
    i = j = n = 0
    room = len(out_left)
    while i < len(left_keys) and j < len(right_keys):
        a, b = left_keys[i], right_keys[j]
        if a != b:  # the common case, without a branch on which side is behind
            i += a < b
            j += b < a
        else:
            key = a
            i_end, j_end = i, j
            while i_end < len(left_keys) and left_keys[i_end] == key:
                i_end += 1
            while j_end < len(right_keys) and right_keys[j_end] == key:
                j_end += 1
            for a in range(i, i_end):
                for b in range(j, j_end):
                    if n < room:
                        out_left[n] = left_rows[a]
                        out_right[n] = right_rows[b]
                    n += 1
            i, j = i_end, j_end
    return n


def matching_rows(left: tuple[np.ndarray, np.ndarray], right: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(left row, right row) of every distinct pair sharing at least one key, ordered; `right` is
    a sorted keys table, merged a record batch at a time (in place, no copy) against the part of
    `left` its keys span."""
    left_keys, left_rows = left
    pairs = [np.empty(0, np.int64)]
    for batch in right.to_batches():
        keys, rows = batch.column(0).to_numpy(), batch.column(1).to_numpy()
        if not len(keys):
            continue
        lo = np.searchsorted(left_keys, keys[0], side="left")
        hi = np.searchsorted(left_keys, keys[-1], side="right")
        pairs.append(_merged_pairs((left_keys[lo:hi], left_rows[lo:hi]), (keys, rows)))
    pairs = np.unique(np.concatenate(pairs))
    return pairs >> 32, pairs & 0xFFFFFFFF


def _merged_pairs(left: tuple[np.ndarray, np.ndarray], right: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """left row << 32 | right row of every pair of rows under an equal key."""
    room = len(left[0]) // 8 + 1024  # one pass when under an eighth of the keys match
    out_left, out_right = np.empty(room, np.int64), np.empty(room, np.int64)
    merge = _compiled_merge()
    n = merge(*left, *right, out_left, out_right)
    if n > room:
        out_left, out_right = np.empty(n, np.int64), np.empty(n, np.int64)
        merge(*left, *right, out_left, out_right)
    return out_left[:n] << 32 | out_right[:n]
