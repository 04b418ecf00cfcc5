"""A dump's content version: what the decisions of later dumps read of its minhash files, as a
digest that does not depend on the order of its documents.

`bucketed` writes a dump's rows in no fixed order (DuckDB's parallel join), so `minhash` of the
same documents can write its rows in another order, and its files' bytes (and their row numbers)
differ. Later decisions depend only on which documents there are, with their band keys and
signatures: the version is the sum modulo 2^64 of one 64-bit hash per document over (id, band
keys, signature), with the number of documents. Two runs over the same documents get the same
version, so no later dump is decided again after a retry or a backfill that changed nothing.
"""

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import xxhash

from fw_assets.dedup.shingling import fmix64, hash_strings

_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class ContentVersion:
    """The running version of the documents written so far (`add` each signed table)."""

    total: np.uint64 = field(default_factory=lambda: np.uint64(0))
    documents: int = 0

    def add(self, signed: pa.Table) -> None:
        with np.errstate(over="ignore"):
            self.total += document_hashes(signed).sum(dtype=np.uint64)
        self.documents += signed.num_rows

    def hexdigest(self) -> str:
        return xxhash.xxh3_64(f"{int(self.total)}:{self.documents}".encode()).hexdigest()


def document_hashes(signed: pa.Table) -> np.ndarray:
    """One 64-bit hash per row of a signed table, over its id, band keys and signature."""
    hashes = hash_strings(signed.column("id").combine_chunks())
    with np.errstate(over="ignore"):
        for words in (_key_words(signed.column("band_keys")), _signature_words(signed.column("signature"))):
            for column in words.T:
                hashes = fmix64(hashes * _MULTIPLIER + column)
    return hashes


def _key_words(column: pa.ChunkedArray) -> np.ndarray:
    """(rows, bands) uint64; a document without shingles (null keys) is all zeros."""
    keys = column.combine_chunks()
    present = ~np.asarray(keys.is_null())
    values = keys.flatten().to_numpy(zero_copy_only=False).astype(np.uint64)
    bands = len(values) // max(int(present.sum()), 1)
    words = np.zeros((len(keys), bands), np.uint64)
    words[present] = values.reshape(-1, bands)
    return words


def _signature_words(column: pa.ChunkedArray) -> np.ndarray:
    """(rows, words) uint64 of fixed-size binary signatures, zero-padded to whole words; a null
    signature (a document without shingles) is all zeros, whatever bytes its slot holds."""
    signatures = column.combine_chunks()
    width = signatures.type.byte_width
    data = np.frombuffer(signatures.buffers()[1], np.uint8)
    data = data[signatures.offset * width:(signatures.offset + len(signatures)) * width].reshape(-1, width)
    padded = np.zeros((len(signatures), -(-width // 8) * 8), np.uint8)
    padded[:, :width] = data
    padded[np.asarray(signatures.is_null())] = 0
    return padded.view(np.uint64)
