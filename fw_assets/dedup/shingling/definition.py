"""The definition of a document's shingles: word n-grams of whole batches of documents,
vectorised (Arrow kernels and numpy), called "the Arrow path".

Text is normalised in datatrove's MinHash steps (lower case; digit runs, decimals included, to
`0`; punctuation and symbols to spaces; accents stripped; whitespace collapsed), with one
difference: every Unicode punctuation and symbol character is a separator here, where datatrove
folds a fixed list of 129 (same words on ASCII text, see docs/benchmarks.md), then split on
whitespace, and every word hashed once per batch (Arrow's dictionary encoding finds the
distinct words). A shingle's hash combines its n word hashes in order, so it depends on the
words alone: the same text gets the same shingles in any batch, at any thread count.

`minhash` files are signed with the package's entry point, `shingles` (fused.py), which computes
the same values in one compiled pass (several times faster) and falls back to this module per
document.
"""

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DIGITS = r"\p{Nd}+([.,،٫⎖⎗⎘]\p{Nd}+)?"
PUNCTUATION = r"[\p{P}\p{S}\p{Cc}]"
ACCENTS = r"\p{Mn}"

MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd; golden-ratio constant
BYTE_BASE = np.uint64(0x100000001B3)  # FNV prime: polynomial base for word bytes


@dataclass(frozen=True)
class Shingles:
    """Shingle hashes of a batch: `hashes[offsets[i]:offsets[i + 1]]` are document i's."""

    hashes: np.ndarray  # uint64
    offsets: np.ndarray  # int64, documents + 1 entries

    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)


def normalise(texts: pa.Array) -> pa.Array:
    """Lower case, digits to `0`, punctuation to spaces, accents stripped (NFD minus marks)."""
    texts = pc.utf8_lower(texts)
    texts = pc.replace_substring_regex(texts, DIGITS, "0")
    texts = pc.replace_substring_regex(texts, PUNCTUATION, " ")
    accented = pc.invert(pc.string_is_ascii(texts))
    if pc.any(accented).as_py():  # NFD costs a pass over the text; ASCII rows have no accents
        stripped = pc.replace_substring_regex(pc.utf8_normalize(texts, "NFD"), ACCENTS, "")
        texts = pc.if_else(accented, stripped, texts)
    return texts


def fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: every input bit reaches every output bit."""
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(0xFF51AFD7ED558CCD)
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(0xC4CEB9FE1A85EC53)
    return x ^ (x >> np.uint64(33))


def string_buffers(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of `strings` (a string array of either offset width) and each string's
    offsets into them (int64, the first 0), without copying the bytes."""
    strings = strings.cast(pa.large_string())
    _, offsets, data = strings.buffers()
    offsets = np.frombuffer(offsets, np.int64)[strings.offset : strings.offset + len(strings) + 1]
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return data[offsets[0] : offsets[-1]], offsets - offsets[0]


def offsets_of(counts: np.ndarray) -> np.ndarray:
    """Where each of consecutive runs of `counts` items starts, and the total (int64)."""
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def hash_strings(strings: pa.Array) -> np.ndarray:
    """A 64-bit hash of each string's UTF-8 bytes (polynomial over the bytes, then mixed)."""
    data, offsets = string_buffers(strings)
    lengths = np.diff(offsets)
    position = np.arange(len(data), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    powers = np.cumprod(np.full(int(lengths.max(initial=0)) + 1, BYTE_BASE, np.uint64))
    terms = (data.astype(np.uint64) + np.uint64(1)) * powers[position]
    sums = np.zeros(len(lengths), np.uint64)
    nonempty = lengths > 0
    if nonempty.any():  # reduceat sums each run up to the next start; empty strings keep 0
        sums[nonempty] = np.add.reduceat(terms, offsets[:-1][nonempty])
    return fmix64(sums ^ lengths.astype(np.uint64))


def words(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Hash of every word of the normalised texts (flat) and each document's word offsets."""
    # Trimmed first: without it a batch's last word now and then kept a trailing blank ("found "),
    # from run to run at two threads (pyarrow 26); only whitespace-only texts still give "".
    split = pc.utf8_split_whitespace(pc.utf8_trim_whitespace(normalise(texts)))
    parents = pc.list_parent_indices(split).to_numpy()
    flat = pc.list_flatten(split)
    empty = pc.equal(pc.binary_length(flat), 0)
    if pc.any(empty).as_py():
        parents = parents[~empty.to_numpy(zero_copy_only=False)]
        flat = flat.filter(pc.invert(empty))
    counts = np.bincount(parents, minlength=len(split))
    offsets = offsets_of(counts)
    encoded = pc.dictionary_encode(flat)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    word_hashes = hash_strings(encoded.dictionary)[encoded.indices.to_numpy(zero_copy_only=False)]
    return word_hashes, offsets


def arrow_shingles(texts: pa.Array, n: int) -> Shingles:
    """Hashes of the word n-grams of each document; documents with fewer than n words get none."""
    word_hashes, word_offsets = words(texts)
    starts = len(word_hashes) - n + 1
    combined = np.zeros(max(starts, 0), np.uint64)
    for k in range(n):  # polynomial in the word hashes: order matters, as in an n-gram
        combined = combined * MULTIPLIER + word_hashes[k : k + len(combined)]
    counts = np.maximum(np.diff(word_offsets) - n + 1, 0)
    first = np.repeat(word_offsets[:-1], counts)
    within = np.arange(len(first), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    hashes = fmix64(combined[first + within]) if len(first) else np.zeros(0, np.uint64)
    return Shingles(hashes, offsets_of(counts))
