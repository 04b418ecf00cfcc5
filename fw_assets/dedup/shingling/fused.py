"""The package's entry point, `shingles`: the shingles of the definition (definition.py), bit for
bit, in one compiled pass over the text.

The Arrow path normalises whole batches with several kernels (lower case, two regexes, NFD),
splits, encodes a dictionary of words and hashes it: most of a `minhash` step's time. Here a
compiled loop (kernel.py) walks each document's UTF-8 bytes once, looking every code point up in
tables derived from those same kernels (code_points.py).
A document holding a code point whose effect depends on its neighbours (or invalid UTF-8) is
shingled by the Arrow path instead, and its shingles are put back in its place.
"""

import numpy as np
import pyarrow as pa

from fw_assets.dedup.shingling.code_points import code_point_tables
from fw_assets.dedup.shingling.definition import Shingles, arrow_shingles, offsets_of, string_buffers


def shingles(texts: pa.Array | pa.ChunkedArray, n: int) -> Shingles:
    """The word n-gram shingles of each document of `texts`; equal to `arrow_shingles(texts, n)`:
    the same hashes and offsets."""
    texts = _utf8_strings(texts)
    fused, rows = fused_pass(texts, n)
    if not len(rows):
        return fused
    return _merged(fused, rows, arrow_shingles(texts.take(pa.array(rows)), n))


def fused_pass(texts: pa.Array | pa.ChunkedArray, n: int) -> tuple[Shingles, np.ndarray]:
    """The compiled pass alone: shingles of the documents it could shingle (none for the
    others), and the rows of the others, left to the Arrow path."""
    # Imported here: the kernel compiles (loads numba and LLVM) when imported, which loading the
    # code location must not do (fw_assets_tests/test_structure.py).
    from fw_assets.dedup.shingling.kernel import shingle_documents

    texts = _utf8_strings(texts)
    tables = code_point_tables()
    data, offsets = string_buffers(texts)
    valid = texts.is_valid().to_numpy(zero_copy_only=False)
    hashes, counts, fallback = shingle_documents(
        data, offsets, valid, n,
        tables.kinds, tables.separators, tables.word_offsets, tables.word_bytes,
    )
    return Shingles(hashes, offsets_of(counts)), np.flatnonzero(fallback)


def _utf8_strings(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if texts.type not in (pa.string(), pa.large_string()):
        texts = texts.cast(pa.large_string())
    return texts


def _merged(fused: Shingles, rows: np.ndarray, fallen: Shingles) -> Shingles:
    """`fused` with the shingles of its documents `rows` (it has none for them) from `fallen`."""
    counts = fused.counts()
    counts[rows] = fallen.counts()
    offsets = offsets_of(counts)
    hashes = np.empty(offsets[-1], np.uint64)
    for part, documents in ((fused, np.arange(len(counts))), (fallen, rows)):
        shift = np.repeat(offsets[documents] - part.offsets[:-1], part.counts())
        hashes[np.arange(len(part.hashes)) + shift] = part.hashes
    return Shingles(hashes, offsets)
