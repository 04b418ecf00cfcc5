"""fw_assets.lib.compiled: compiled loops give the Python function's results, and the 32+32-bit keys
sort as their pairs and refuse what does not fit."""

import numpy as np
import pytest

from fw_assets.lib.compiled import PACKED_LIMIT, compiled_lazily, pack_pairs, unpack_pairs


def _running_sum(values, out):  # pragma: no cover - compiled
    total = 0.0
    for i in range(len(values)):
        total += values[i]
        out[i] = total


def test_a_lazily_compiled_loop_computes_what_the_python_loop_computes():
    values = np.random.default_rng(0).random(1000)
    expected, got = np.empty_like(values), np.empty_like(values)
    _running_sum(values, expected)
    compiled_lazily(_running_sum)(values, got)
    assert np.array_equal(expected, got)  # same order of additions: bit for bit


def test_packed_keys_sort_as_their_pairs_and_unpack_to_them():
    rng = np.random.default_rng(1)
    high = rng.integers(0, PACKED_LIMIT, 5000)
    low = rng.integers(0, PACKED_LIMIT, 5000)
    high[:2], low[:2] = PACKED_LIMIT - 1, [0, PACKED_LIMIT - 1]  # the extremes
    keys = pack_pairs(high, low)
    order = np.lexsort((low, high))
    assert np.array_equal(np.argsort(keys, kind="stable"), order)
    back_high, back_low = unpack_pairs(keys)
    assert np.array_equal(back_high, high) and np.array_equal(back_low, low)


@pytest.mark.parametrize("high, low", [([PACKED_LIMIT], [0]), ([0], [PACKED_LIMIT]), ([-1], [0])])
def test_a_number_outside_32_bits_is_refused_not_wrapped(high, low):
    with pytest.raises(OverflowError, match="cannot share a 64-bit key"):
        pack_pairs(np.array(high, np.int64), np.array(low, np.int64))
