"""The run-time proof that a dump's tokens are tiktoken's, whichever backend encoded them.

A deterministic sample of the dump's documents, chosen by a hash of their id, is encoded again with
the tokenizer's reference encoder and compared with what the backend wrote. A difference stops the
step before anything is published, naming the document and the first differing token.
"""

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from fw_assets.tokenizing.backends import EncoderBackend, first_difference
from fw_assets.tokenizing.encode import EncodedBatch

# The share of a dump's documents compared, raised so that at least SAMPLE_MINIMUM are (all of a
# smaller dump): about 0.1 % of tiktoken's cost on a real dump.
SAMPLE_SHARE = 1 / 1000
SAMPLE_MINIMUM = 500


class TokenMismatch(ValueError):
    """The backend wrote other tokens than tiktoken for a document."""


@dataclass
class OracleSample:
    """Compares the sampled documents of each encoded batch with `oracle` (None: nothing to
    compare, e.g. a tokenizer.json). `documents` is the dump's count, which sets the share."""

    oracle: EncoderBackend | None
    backend: str
    documents: int
    checked: int = 0

    @property
    def share(self) -> float:
        if self.oracle is None or not self.documents:
            return 0.0
        return min(1.0, max(SAMPLE_SHARE, SAMPLE_MINIMUM / self.documents))

    def compare(self, batch: pa.RecordBatch, encoded: EncodedBatch, where: str) -> None:
        """Raise TokenMismatch for the first sampled document of `batch` (columns id, id_hash,
        text) whose tokens in `encoded` are not the oracle's."""
        if self.oracle is None:
            return
        # the share of the uint64 hash range, without overflowing it at a share of 1
        threshold = np.uint64(min(int(self.share * 2.0**64), 2**64 - 1))
        rows = np.flatnonzero(batch.column("id_hash").to_numpy() <= threshold)
        if not rows.size:
            return
        sampled = batch.take(pa.array(rows))
        expected = self.oracle.encode_arrays(sampled.column("text").to_pylist())
        ends = np.cumsum(encoded.lengths)
        for row, doc_id, reference in zip(rows, sampled.column("id").to_pylist(), expected):
            written = encoded.tokens[ends[row] - encoded.lengths[row] : ends[row]]
            position = first_difference(written, reference)
            if position is not None:
                raise TokenMismatch(
                    f"{where}: the {self.backend} backend encoded document {doc_id} other than "
                    f"tiktoken from token {position} on ({_few(written, position)} instead of "
                    f"{_few(reference, position)}); nothing was published. Set the tokenizer "
                    "resource's `backend: tiktoken` to encode with tiktoken alone."
                )
        self.checked += rows.size


def _few(tokens: np.ndarray, start: int) -> list[int]:
    return tokens[start : start + 3].tolist()
