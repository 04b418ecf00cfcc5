"""Matching a dump's band keys against an earlier dump's: every pair of rows under an equal key."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from fw_assets.dedup.sorted_keys import SORTED_KEYS_SCHEMA, key_index, matching_rows


def sorted_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.arange(len(keys), dtype=np.uint32)
    order = np.lexsort((rows, keys))
    return keys[order], rows[order]


def every_pair(own: tuple[np.ndarray, np.ndarray], other: tuple[np.ndarray, np.ndarray]) -> set[tuple[int, int]]:
    by_key: dict[int, list[int]] = {}
    for key, row in zip(*own):
        by_key.setdefault(int(key), []).append(int(row))
    return {(a, int(b)) for key, b in zip(*other) for a in by_key.get(int(key), [])}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_pair_under_an_equal_key_once_whatever_the_runs_and_batches(seed):
    """Keys repeated on both sides (a page recurring in a dump), keys spread over all 64 bits
    and over the smallest values, an earlier file cut into record batches inside a run."""
    rng = np.random.default_rng(seed)
    shared = rng.integers(0, 2**64 - 1, 300, dtype=np.uint64)
    own = sorted_keys(np.concatenate([
        rng.integers(0, 2**64 - 1, 5000, dtype=np.uint64), rng.choice(shared, 2000),
        np.arange(5, dtype=np.uint64), np.full(3, 2**64 - 1, np.uint64),
    ]))
    other = sorted_keys(np.concatenate([
        rng.integers(0, 2**64 - 1, 4000, dtype=np.uint64), rng.choice(shared, 1500),
        np.arange(3, 8, dtype=np.uint64), np.full(2, 2**64 - 1, np.uint64),
    ]))
    table = pa.table(list(other), schema=SORTED_KEYS_SCHEMA)
    batches = pa.Table.from_batches(table.to_batches(max_chunksize=777))
    own_rows, other_rows = matching_rows(key_index(*own), batches.to_batches())
    expected = every_pair(own, other)
    assert len(expected) > 2000
    assert list(zip(own_rows.tolist(), other_rows.tolist())) == sorted(expected)


def test_an_empty_index_matches_nothing_and_one_key_matches_itself():
    empty = np.zeros(0, np.uint64), np.zeros(0, np.uint32)
    one = pa.table({"key": [7], "row": [0]}, schema=SORTED_KEYS_SCHEMA)
    assert [a.tolist() for a in matching_rows(key_index(*empty), one.to_batches())] == [[], []]
    seven = key_index(np.array([7], np.uint64), np.array([0], np.uint32))
    assert [a.tolist() for a in matching_rows(seven, one.to_batches())] == [[0], [0]]
