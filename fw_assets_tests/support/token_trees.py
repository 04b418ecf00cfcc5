"""Synthetic tokenized trees for the mixture tests, written by the project's own token-file writers.

Document lengths follow a log-normal law like web text (many short pages, a long tail), scaled
down so that tests run in seconds.
"""

from pathlib import Path

import numpy as np
import pyarrow as pa

from fw_assets.formats.doc_index import DocumentIndexWriter
from fw_assets.formats.indexed_dataset import IndexedDatasetWriter, optimal_token_dtype
from fw_assets.paths import token_prefix


def document_lengths(rng: np.random.Generator, documents: int, median: float) -> np.ndarray:
    """Token counts (end-of-document token included) of `documents` web-like documents."""
    lengths = rng.lognormal(mean=np.log(median), sigma=1.0, size=documents)
    return np.clip(lengths.round(), 2, 50 * median).astype(np.int64)


def write_token_file(
    output_root: Path, tokenizer: str, bucket: str, dump: str, lengths: np.ndarray,
    vocab_size: int, rng: np.random.Generator,
) -> Path:
    """`.bin`, `.idx` and `.docs.parquet` of one (bucket, dump); every document ends with EOD."""
    prefix = token_prefix(output_root, tokenizer, bucket, dump)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    dtype = optimal_token_dtype(vocab_size)
    tokens = rng.integers(0, vocab_size - 1, size=int(lengths.sum()), dtype=np.int64)
    tokens[np.cumsum(lengths) - 1] = vocab_size - 1  # EOD
    ids = pa.array([f"<urn:uuid:{bucket}-{dump}-{i:06d}>" for i in range(len(lengths))])
    with IndexedDatasetWriter(prefix, dtype) as writer, DocumentIndexWriter(prefix) as docs:
        writer.add_documents(tokens.astype(dtype), lengths)
        docs.add(ids, lengths)
    return prefix
