"""Hashes of many byte strings in one compiled loop over an Arrow string array's buffers (data,
offsets): XXH64 (xxHash's 64-bit hash, the `xxhash` package's `xxh64`) and BLAKE2b with an 8-byte
digest (`hashlib.blake2b(digest_size=8)`), each bit for bit.

Its functions are compiled when the module is imported (they call one another): it is imported
only when strings are hashed (string_hashes.py), so that loading the code location does not load
LLVM (fw_assets_tests/test_structure.py).
"""

import numpy as np

from fw_assets.lib.compiled import compiled

P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
P3 = np.uint64(0x165667B19E3779F9)
P4 = np.uint64(0x85EBCA77C2B2AE63)
P5 = np.uint64(0x27D4EB2F165667C5)
_ZERO = np.uint64(0)


@compiled
def _rotl(x, bits):
    return (x << np.uint64(bits)) | (x >> np.uint64(64 - bits))


@compiled
def _round(accumulator, lane):
    return _rotl(accumulator + lane * P2, 31) * P1


@compiled
def _merge(accumulator, lane):
    return (accumulator ^ _round(_ZERO, lane)) * P1 + P4


@compiled
def _lane(data, at, size):
    """The little-endian `size`-byte number at data[at]."""
    value = _ZERO
    for i in range(size):
        value |= np.uint64(data[at + i]) << np.uint64(8 * i)
    return value


@compiled
def _xxh64(data, start, end, seed):
    """XXH64 of data[start:end]."""
    at = start
    if end - start >= 32:
        v1, v2, v3, v4 = seed + P1 + P2, seed + P2, seed, seed - P1
        while at + 32 <= end:
            v1 = _round(v1, _lane(data, at, 8))
            v2 = _round(v2, _lane(data, at + 8, 8))
            v3 = _round(v3, _lane(data, at + 16, 8))
            v4 = _round(v4, _lane(data, at + 24, 8))
            at += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(_merge(_merge(_merge(h, v1), v2), v3), v4)
    else:
        h = seed + P5
    h += np.uint64(end - start)
    while at + 8 <= end:
        h = _rotl(h ^ _round(_ZERO, _lane(data, at, 8)), 27) * P1 + P4
        at += 8
    if at + 4 <= end:
        h = _rotl(h ^ (_lane(data, at, 4) * P1), 23) * P2 + P3
        at += 4
    while at < end:
        h = _rotl(h ^ (np.uint64(data[at]) * P5), 11) * P1
        at += 1
    h ^= h >> np.uint64(33)
    h *= P2
    h ^= h >> np.uint64(29)
    h *= P3
    return h ^ (h >> np.uint64(32))


@compiled
def xxh64_each(data, offsets, seed):
    """XXH64(data[offsets[i]:offsets[i + 1]], seed) for every i."""
    hashes = np.empty(len(offsets) - 1, np.uint64)
    for i in range(len(hashes)):
        hashes[i] = _xxh64(data, np.int64(offsets[i]), np.int64(offsets[i + 1]), seed)
    return hashes


# BLAKE2b (RFC 7693)
_IV = np.array([0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
                0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179], np.uint64)
_SIGMA = np.array([
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
], np.int64)
_BLOCK = 128


@compiled
def _rotr(x, bits):
    return (x >> np.uint64(bits)) | (x << np.uint64(64 - bits))


@compiled
def _mix(v, a, b, c, d, x, y):
    v[a] = v[a] + v[b] + x
    v[d] = _rotr(v[d] ^ v[a], 32)
    v[c] = v[c] + v[d]
    v[b] = _rotr(v[b] ^ v[c], 24)
    v[a] = v[a] + v[b] + y
    v[d] = _rotr(v[d] ^ v[a], 16)
    v[c] = v[c] + v[d]
    v[b] = _rotr(v[b] ^ v[c], 63)


@compiled
def _compress(h, m, v, counted, last):
    for i in range(8):
        v[i], v[i + 8] = h[i], _IV[i]
    v[12] ^= np.uint64(counted)
    if last:
        v[14] = ~v[14]
    for r in range(12):
        s = _SIGMA[r % 10]
        _mix(v, 0, 4, 8, 12, m[s[0]], m[s[1]])
        _mix(v, 1, 5, 9, 13, m[s[2]], m[s[3]])
        _mix(v, 2, 6, 10, 14, m[s[4]], m[s[5]])
        _mix(v, 3, 7, 11, 15, m[s[6]], m[s[7]])
        _mix(v, 0, 5, 10, 15, m[s[8]], m[s[9]])
        _mix(v, 1, 6, 11, 12, m[s[10]], m[s[11]])
        _mix(v, 2, 7, 8, 13, m[s[12]], m[s[13]])
        _mix(v, 3, 4, 9, 14, m[s[14]], m[s[15]])
    for i in range(8):
        h[i] ^= v[i] ^ v[i + 8]


@compiled
def _blake2b_8(data, start, end, h, m, v):
    """The first word of BLAKE2b-64 of data[start:end] (its 8 digest bytes, little-endian)."""
    for i in range(8):
        h[i] = _IV[i]
    h[0] ^= np.uint64(0x01010008)  # digest length 8, no key, fanout and depth 1
    at = start
    while True:
        size = min(_BLOCK, end - at)
        last = at + size >= end
        for i in range(16):
            m[i] = _ZERO
        for i in range(size):
            m[i // 8] |= np.uint64(data[at + i]) << np.uint64(8 * (i % 8))
        at += size
        _compress(h, m, v, at - start, last)
        if last:
            return h[0]


@compiled
def blake2b_8_each(data, offsets):
    """BLAKE2b-64 of data[offsets[i]:offsets[i + 1]] for every i, each as the digest's 8 bytes
    read big-endian (the order of the digests as bytes)."""
    h, m, v = np.empty(8, np.uint64), np.empty(16, np.uint64), np.empty(16, np.uint64)
    digests = np.empty(len(offsets) - 1, np.uint64)
    for i in range(len(digests)):
        word = _blake2b_8(data, np.int64(offsets[i]), np.int64(offsets[i + 1]), h, m, v)
        swapped = _ZERO
        for k in range(8):
            swapped = (swapped << np.uint64(8)) | ((word >> np.uint64(8 * k)) & np.uint64(0xFF))
        digests[i] = swapped
    return digests
