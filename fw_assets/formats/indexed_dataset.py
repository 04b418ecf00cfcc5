"""Megatron-LM IndexedDataset files (`<prefix>.bin` + `<prefix>.idx`), byte-compatible with
megatron.core.datasets.indexed_dataset (0.16), one sequence per document.

`.idx` layout: magic `MMIDIDX\\x00\\x00`, u64 version 1, u8 dtype code, u64 sequence count,
u64 document count (documents + 1), int32 sequence lengths, int64 byte pointers into `.bin`,
int64 document indices 0..N. `.bin` holds the tokens back to back. Like Megatron, arrays are
written in the machine's byte order (little-endian on every platform it supports).
"""

import struct
from array import array
from pathlib import Path

import numpy as np

from fw_assets.lib.write_behind import WriteBehindFile
from fw_assets.lib.writers import KeepOnSuccess
from fw_assets.paths import bin_path, idx_path

INDEX_MAGIC = b"MMIDIDX\x00\x00"
INDEX_VERSION = 1
# magic, version, dtype code, sequence count, document count; "<" = no padding, 34 bytes
INDEX_HEADER = struct.Struct("<9sQBQQ")

# Megatron's DType enum
DTYPE_CODES = {
    np.dtype(np.uint8): 1,
    np.dtype(np.int8): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
    np.dtype(np.float64): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.uint16): 8,
}
DTYPES_BY_CODE = {code: dtype for dtype, code in DTYPE_CODES.items()}

# Index arrays are written this many entries at a time, so finalizing millions of documents
# needs a few MB beyond the lengths themselves.
_INDEX_WRITE_CHUNK = 1 << 20


def optimal_token_dtype(vocab_size: int) -> np.dtype:
    """The token dtype Megatron picks for a vocabulary (`DType.optimal_dtype`)."""
    return np.dtype(np.uint16) if vocab_size < 65500 else np.dtype(np.int32)


class IndexedDatasetWriter(KeepOnSuccess):
    """Streams documents into `<prefix>.bin` (through a bounded window of the page cache, see
    lib/write_behind.py); `finish()` writes `<prefix>.idx`.

    Memory is 4 bytes per document (its length), whatever the number of tokens. Used as a
    context manager, an exception deletes the partial `.bin` and writes no `.idx`.
    """

    def __init__(self, prefix: Path, dtype: np.dtype | type) -> None:
        self.prefix = Path(prefix)
        self.dtype = np.dtype(dtype)
        if self.dtype not in DTYPE_CODES or self.dtype.kind not in "iu":
            raise ValueError(f"token dtype must be an integer Megatron dtype, got {self.dtype}")
        self._lengths = array("i")
        if self._lengths.itemsize != 4:
            raise RuntimeError("this platform's C int is not 32 bits; the index needs int32")
        self.token_count = 0
        # a stale .idx beside the new .bin would describe other tokens until finish()
        idx_path(self.prefix).unlink(missing_ok=True)
        self._bin = WriteBehindFile(bin_path(self.prefix))

    @property
    def document_count(self) -> int:
        return len(self._lengths)

    def add_documents(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        """Append documents (1-D integer arrays) to `.bin`: their tokens back to back, and each
        one's length; one write per batch, not per document."""
        tokens = as_token_dtype(np.asarray(tokens), self.dtype)
        lengths = np.asarray(lengths)
        if lengths.ndim != 1 or int(lengths.sum()) != tokens.size or (lengths < 0).any():
            raise ValueError(
                f"lengths summing to {int(lengths.sum())} do not split {tokens.size} tokens"
            )
        if lengths.size and lengths.max() > np.iinfo(np.int32).max:
            raise ValueError(f"a document of {lengths.max()} tokens does not fit the int32 index")
        self._bin.write(memoryview(np.ascontiguousarray(tokens)))
        self._lengths.frombytes(lengths.astype(np.int32).tobytes())
        self.token_count += tokens.size

    def finish(self) -> None:
        """Close `.bin` and write `.idx`; the pair is readable only after this."""
        self._bin.close()
        write_index(self.prefix, np.frombuffer(self._lengths, dtype=np.int32), self.dtype)

    def abort(self) -> None:
        """Close and delete the partial `.bin`."""
        self._bin.close()
        bin_path(self.prefix).unlink(missing_ok=True)


def write_index(prefix: Path, lengths: np.ndarray, dtype: np.dtype) -> None:
    """`<prefix>.idx` for documents of `lengths` (int32) tokens of `dtype`, back to back in `.bin`."""
    dtype = np.dtype(dtype)
    with open(idx_path(prefix), "wb") as stream:
        _write_header_and_lengths(stream, lengths, dtype)
        _write_byte_pointers(stream, lengths, dtype.itemsize)
        _write_document_indices(stream, len(lengths))


def write_view_index(prefix: Path, source: "IndexedDatasetReader", documents: np.ndarray) -> None:
    """`<prefix>.idx` listing `documents` (sequence numbers of `source`, in this order, repeats
    allowed) that point into `source`'s tokens: `<prefix>.bin` must be (a link to) its `.bin`."""
    with open(idx_path(prefix), "wb") as stream:
        _write_header(stream, len(documents), source.dtype)
        for column in (source.sequence_lengths, source.sequence_pointers):  # a chunk at a time: a view is large
            for start in range(0, len(documents), _INDEX_WRITE_CHUNK):
                stream.write(memoryview(column[documents[start: start + _INDEX_WRITE_CHUNK]]))
        _write_document_indices(stream, len(documents))


def _write_header(stream, sequences: int, dtype: np.dtype) -> None:
    """One sequence a document: N sequences, N + 1 document indices."""
    stream.write(INDEX_HEADER.pack(INDEX_MAGIC, INDEX_VERSION, DTYPE_CODES[dtype], sequences, sequences + 1))


def _write_header_and_lengths(stream, lengths: np.ndarray, dtype: np.dtype) -> None:
    _write_header(stream, len(lengths), dtype)
    stream.write(memoryview(np.ascontiguousarray(lengths, dtype=np.int32)))


def as_token_dtype(tokens: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`tokens` as `dtype`, refusing values it cannot hold (a silent wrap would corrupt data)."""
    if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
        raise ValueError(f"a document is a 1-D integer array, got {tokens.dtype} {tokens.shape}")
    if tokens.dtype == dtype:
        return tokens
    limits = np.iinfo(dtype)
    below = tokens.dtype.kind == "i" and tokens.size and tokens.min() < limits.min  # unsigned: never
    if below or (tokens.size and tokens.max() > limits.max):
        raise ValueError(f"token ids {tokens.min()}..{tokens.max()} do not fit {dtype}")
    if tokens.dtype.itemsize == np.dtype(dtype).itemsize:
        return tokens.view(dtype)  # e.g. uint32 ids below 2^31 are their int32 bytes: no copy
    return tokens.astype(dtype)


def _write_byte_pointers(stream, lengths: np.ndarray, itemsize: int) -> None:
    """Each sequence's byte offset in `.bin`: the exclusive running sum of its byte lengths."""
    offset = 0
    for start in range(0, len(lengths), _INDEX_WRITE_CHUNK):
        nbytes = lengths[start : start + _INDEX_WRITE_CHUNK].astype(np.int64) * itemsize
        pointers = np.cumsum(nbytes) - nbytes + offset
        stream.write(memoryview(pointers))
        offset += int(nbytes.sum())


def _write_document_indices(stream, document_count: int) -> None:
    """0, 1, …, N: document i is sequence i (one sequence per document)."""
    for start in range(0, document_count + 1, _INDEX_WRITE_CHUNK):
        stop = min(start + _INDEX_WRITE_CHUNK, document_count + 1)
        stream.write(memoryview(np.arange(start, stop, dtype=np.int64)))


class IndexedDatasetReader:
    """Memory-mapped view of a `.bin`/`.idx` pair; `reader[i]` is document i's tokens."""

    def __init__(self, prefix: Path) -> None:
        self.prefix = Path(prefix)
        index = np.memmap(idx_path(self.prefix), dtype=np.uint8, mode="r")
        if len(index) < INDEX_HEADER.size:
            raise ValueError(f"{idx_path(self.prefix)}: {len(index)} bytes, less than a header")
        magic, version, code, sequence_count, document_count = INDEX_HEADER.unpack_from(index)
        self._check_header(magic, version, code)
        self.dtype = DTYPES_BY_CODE[code]
        offset = INDEX_HEADER.size
        self.sequence_lengths = np.frombuffer(index, np.int32, sequence_count, offset)
        offset += self.sequence_lengths.nbytes
        self.sequence_pointers = np.frombuffer(index, np.int64, sequence_count, offset)
        offset += self.sequence_pointers.nbytes
        self.document_indices = np.frombuffer(index, np.int64, document_count, offset)
        self.token_count = int(self.sequence_lengths.sum(dtype=np.int64))
        self._tokens = self._map_tokens()

    def _check_header(self, magic: bytes, version: int, code: int) -> None:
        path = idx_path(self.prefix)
        if magic != INDEX_MAGIC:
            raise ValueError(f"{path}: magic {magic!r} is not {INDEX_MAGIC!r}")
        if version != INDEX_VERSION:
            raise ValueError(f"{path}: version {version}, only {INDEX_VERSION} is known")
        if code not in DTYPES_BY_CODE:
            raise ValueError(f"{path}: unknown dtype code {code}")

    def _map_tokens(self) -> np.ndarray:
        """A `.bin` holds exactly the tokens its `.idx` describes, unless the `.idx` is a view of
        some of a larger file's documents (its `.bin` a link to that file's, hard as the mixtures'
        views pin their tokens, or symbolic): then they must lie within it."""
        path = bin_path(self.prefix)
        status = path.stat()
        actual, expected = status.st_size, self.token_count * self.dtype.itemsize
        linked = path.is_symlink() or status.st_nlink > 1
        if actual != expected and len(self) and (linked or not self._laid_out_whole()):
            ends = self.sequence_pointers + self.sequence_lengths.astype(np.int64) * self.dtype.itemsize
            if int(ends.max()) > actual or int(self.sequence_pointers.min()) < 0:
                raise ValueError(f"{path}: {actual} bytes, the view's index points up to byte {int(ends.max())}")
        elif actual != expected:
            raise ValueError(f"{path}: {actual} bytes, the index describes {expected}")
        if actual == 0:  # numpy cannot map an empty file
            return np.empty(0, self.dtype)
        return np.memmap(path, dtype=self.dtype, mode="r")

    def _laid_out_whole(self) -> bool:
        """True when the documents lie end to end from byte 0, as in a file's own index (a view
        left as the only link to its tokens lists them in another order)."""
        ends = self.sequence_pointers[:-1] + self.sequence_lengths[:-1].astype(np.int64) * self.dtype.itemsize
        return int(self.sequence_pointers[0]) == 0 and bool(np.array_equal(ends, self.sequence_pointers[1:]))

    @property
    def document_count(self) -> int:
        return len(self.document_indices) - 1

    def __len__(self) -> int:
        return len(self.sequence_lengths)

    def __getitem__(self, i: int) -> np.ndarray:
        start = int(self.sequence_pointers[i]) // self.dtype.itemsize
        return self._tokens[start : start + int(self.sequence_lengths[i])]
