"""Tokenizing one bucket of one dump, apart from Dagster so tests and benchmarks call it directly.

DuckDB reads the bucket's parquet files and orders the documents by id (spilling to disk beyond
its memory limit); arrow batches stream from the sorted result to the encoder's workers; the
tokens, in the same order, go to `<prefix>.bin`/`.idx` and the ids to `<prefix>.docs.parquet`.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import tee
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from fw_assets.lib.progress import ProgressReporter, call_with_progress
from fw_assets.lib.sql import load_sql
from fw_assets.tokenizing.doc_index import DocumentIndexWriter
from fw_assets.tokenizing.encode import ParallelEncoder
from fw_assets.tokenizing.indexed_dataset import IndexedDatasetWriter
from fw_assets.tokenizing.layout import token_files
from fw_assets.tokenizing.progress import TokenProgress


@dataclass(frozen=True)
class BucketTokens:
    """What tokenizing one bucket wrote, and how long it took."""

    documents: int
    tokens: int
    bytes: int
    ordering_seconds: float
    seconds: float


def documents_in_id_order(
    con: duckdb.DuckDBPyConnection, files: list[Path], batch_rows: int
) -> pa.RecordBatchReader:
    """(id, text) batches of `batch_rows` documents, ordered by id. Returns once DuckDB has
    ordered the rows; the batches then stream from the sorted result."""
    relation = con.sql(load_sql("documents_by_id"), params={"files": [str(f) for f in files]})
    return relation.to_arrow_reader(batch_rows)


def tokenize_bucket(
    con: duckdb.DuckDBPyConnection,
    files: list[Path],
    prefix: Path,
    encoder: ParallelEncoder,
    token_dtype: np.dtype,
    batch_rows: int,
    ordering: ProgressReporter,
    progress: TokenProgress,
    where: str,
) -> BucketTokens:
    """Write every document of `files` as `<prefix>.bin`, `.idx` and `.docs.parquet`.

    `ordering` logs DuckDB's progress while it orders the documents, `progress` counts what is
    written; `where` (e.g. "Dump CC-MAIN-2024-10, bucket 3.0") starts every error message.
    """
    started = time.monotonic()
    reader = call_with_progress(con, lambda: documents_in_id_order(con, files, batch_rows), ordering)
    ordered = time.monotonic()
    for_texts, for_ids = tee(_complete_batches(reader, con, files, where))
    with IndexedDatasetWriter(prefix, token_dtype) as tokens_out, DocumentIndexWriter(prefix) as docs_out:
        encoded = encoder.encode(batch.column("text").to_pylist() for batch in for_texts)
        for batch, result in zip(for_ids, encoded):
            tokens_out.add_documents(result.tokens, result.lengths)
            docs_out.add(batch.column("id"), result.lengths)
            progress.add(batch.num_rows, result.tokens.size)
    return BucketTokens(
        documents=tokens_out.document_count,
        tokens=tokens_out.token_count,
        bytes=sum(path.stat().st_size for path in token_files(prefix)),
        ordering_seconds=ordered - started,
        seconds=time.monotonic() - started,
    )


def _complete_batches(
    reader: pa.RecordBatchReader, con: duckdb.DuckDBPyConnection, files: list[Path], where: str
) -> Iterator[pa.RecordBatch]:
    """The reader's batches; a row without id or text stops the run with the files that hold it."""
    for batch in reader:
        if batch.column("id").null_count or batch.column("text").null_count:
            raise ValueError(f"{where}: {_describe_missing_values(con, files)}")
        yield batch


def _describe_missing_values(con: duckdb.DuckDBPyConnection, files: list[Path]) -> str:
    # on a cursor of its own: `con` still holds the open, sorted result
    with con.cursor() as cursor:
        parameters = {"files": [str(f) for f in files]}
        rows = cursor.execute(load_sql("documents_missing_values"), parameters).fetchall()
    problems = [
        f"{filename} has {without_id:,} rows without id and {without_text:,} without text"
        + (f" (e.g. ids {', '.join(example_ids)})" if example_ids else "")
        for filename, without_id, without_text, example_ids in rows
    ]
    return (
        "every document needs an id and a text to be tokenized, but "
        + "; ".join(problems)
        + ". Re-materialize `bucketed` for this dump; nothing was published."
    )
