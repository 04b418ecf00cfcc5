"""Test helpers for token files: encode texts in one call, add documents one at a time."""

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from fw_assets.formats.indexed_dataset import IndexedDatasetWriter
from fw_assets.tokenizing.encode import EncodedBatch, ParallelEncoder
from fw_assets.tokenizing.tokenizer import TokenizerSpec


def encode_batches(
    text_batches: Iterable[Sequence[str]], spec: TokenizerSpec, workers: int = 1
) -> Iterator[EncodedBatch]:
    """Encode each batch of texts with a `ParallelEncoder` of its own, yielding results in order."""
    return _encode_and_close(ParallelEncoder(spec, workers), text_batches)


def _encode_and_close(
    encoder: ParallelEncoder, text_batches: Iterable[Sequence[str]]
) -> Iterator[EncodedBatch]:
    with encoder:
        yield from encoder.encode(text_batches)


def encode_documents(
    text_batches: Iterable[Sequence[str]], spec: TokenizerSpec, workers: int = 1
) -> Iterator[np.ndarray]:
    """Each document's tokens (no EOD: the token file's writer adds it) in input order; see
    `encode_batches`."""
    for batch in encode_batches(text_batches, spec, workers):
        yield from batch.documents()


def add_document(writer: IndexedDatasetWriter, tokens: np.ndarray) -> None:
    """Append one document, as the tokenized step's batches do for many."""
    tokens = np.asarray(tokens)
    writer.add_documents(tokens, np.array([tokens.size]))
