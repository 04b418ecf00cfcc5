"""Hashes of every string of an Arrow array, computed over its buffers in one compiled loop (no
Python string a row), bit for bit those of the `xxhash` and `hashlib` packages:
`xxh64_strings` equals `xxhash.xxh64_intdigest(prefix + s, seed)` for each string `s`, and
`blake2b_64_strings` equals `int.from_bytes(hashlib.blake2b(prefix + s, digest_size=8).digest(), "big")`."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def xxh64_strings(strings: pa.Array | pa.ChunkedArray, prefix: bytes = b"", seed: int = 0) -> np.ndarray:
    """XXH64 of `prefix` + each string's UTF-8 bytes (uint64, one per string); refuses nulls."""
    # Imported here: the kernels compile (load numba and LLVM) when imported.
    from fw_assets.lib.hash_kernels import xxh64_each

    return np.concatenate([np.zeros(0, np.uint64)] + [
        xxh64_each(data, offsets, np.uint64(seed)) for data, offsets in _buffers(strings, prefix)])


def blake2b_64_strings(strings: pa.Array | pa.ChunkedArray, prefix: bytes = b"") -> np.ndarray:
    """BLAKE2b with an 8-byte digest of `prefix` + each string's UTF-8 bytes, the digest read as a
    big-endian uint64 (so that the numbers sort as the digests do); refuses nulls."""
    from fw_assets.lib.hash_kernels import blake2b_8_each

    return np.concatenate([np.zeros(0, np.uint64)] + [
        blake2b_8_each(data, offsets) for data, offsets in _buffers(strings, prefix)])


def _buffers(strings: pa.Array | pa.ChunkedArray, prefix: bytes):
    """(data, offsets) of each chunk as numpy arrays, `prefix` before every string."""
    for chunk in strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]:
        if chunk.null_count:
            raise ValueError(f"{chunk.null_count:,} of {len(chunk):,} strings are null: a null has no hash")
        large = pa.types.is_large_string(chunk.type) or pa.types.is_large_binary(chunk.type)
        if not (large or pa.types.is_string(chunk.type) or pa.types.is_binary(chunk.type)):
            raise TypeError(f"hashing strings, not {chunk.type}")
        if prefix:  # one copy of the chunk with the prefix before every string (Arrow's kernel)
            chunk = pc.binary_join_element_wise(pa.scalar(prefix, pa.binary()), chunk.cast(pa.binary()), b"")
            large = pa.types.is_large_binary(chunk.type)
        _, offsets, data = chunk.buffers()
        offsets = np.frombuffer(offsets, np.int64 if large else np.int32)[chunk.offset: chunk.offset + len(chunk) + 1]
        yield (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)), offsets
