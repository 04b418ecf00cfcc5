"""Hashes over Arrow string buffers equal the hash packages' own, bit for bit: xxhash's xxh64 and
hashlib's 8-byte BLAKE2b, with a prefix, on any length (the algorithms' block edges), any script,
sliced, chunked and large strings; nulls refused."""

import hashlib

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from fw_assets.lib.string_hashes import blake2b_64_strings, xxh64_strings

RNG = np.random.default_rng(7)
STRINGS = [
    "", "a", "<urn:uuid:0f0e0d0c-0b0a-4908-8706-050403020100>", "é漢字🙂" * 9,
    *("x" * n for n in (3, 4, 7, 8, 31, 32, 33, 63, 64, 127, 128, 129, 255, 256, 257)),
    *("".join(map(chr, RNG.integers(32, 0x3000, int(n)))) for n in RNG.integers(0, 200, 300)),
]


def _arrays():
    yield pa.array(STRINGS)
    yield pa.array(STRINGS, pa.large_string())
    yield pa.array(["before", *STRINGS, "after"]).slice(1, len(STRINGS))
    yield pa.chunked_array([pa.array(STRINGS[:5]), pa.array(STRINGS[5:])])


@pytest.mark.parametrize("prefix, seed", [(b"", 0), (b"1234:", 0), (b"7:", 2**64 - 1), (b"p" * 130, 99)])
def test_xxh64_of_each_string_is_xxhash_s(prefix, seed):
    expected = [xxhash.xxh64_intdigest(prefix + s.encode(), seed=seed) for s in STRINGS]
    for strings in _arrays():
        assert xxh64_strings(strings, prefix, seed).tolist() == expected


@pytest.mark.parametrize("prefix", [b"", b"1234\x00", b"q" * 200])
def test_blake2b_of_each_string_is_hashlib_s_digest_read_big_endian(prefix):
    expected = [int.from_bytes(hashlib.blake2b(prefix + s.encode(), digest_size=8).digest(), "big") for s in STRINGS]
    for strings in _arrays():
        assert blake2b_64_strings(strings, prefix).tolist() == expected


def test_nulls_and_other_types_are_refused():
    with pytest.raises(ValueError, match="1 of 2 strings are null"):
        xxh64_strings(pa.array(["a", None]))
    with pytest.raises(TypeError, match="not int64"):
        blake2b_64_strings(pa.array([1, 2]))
    assert xxh64_strings(pa.array([], pa.string())).tolist() == []
