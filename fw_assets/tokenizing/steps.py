"""Tokenizing the buckets of one dump, apart from Dagster so tests and benchmarks call it directly.

DuckDB reads a bucket's parquet files and orders the documents by id (spilling to disk beyond its
memory limit); arrow batches stream from the sorted result to the encoder's workers; the tokens,
in the same order, go to `<prefix>.bin`/`.idx` and the ids to `<prefix>.docs.parquet`. While one
bucket is encoded, DuckDB already orders the next one, so the workers wait only for the first.
"""

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing
from dataclasses import dataclass
from itertools import tee
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from fw_assets.lib.progress import ProgressReporter, wait_with_progress
from fw_assets.lib.sql import load_sql
from fw_assets.tokenizing.doc_index import DocumentIndexWriter
from fw_assets.tokenizing.encode import ParallelEncoder
from fw_assets.tokenizing.indexed_dataset import IndexedDatasetWriter
from fw_assets.tokenizing.layout import token_files
from fw_assets.tokenizing.progress import TokenProgress


@dataclass(frozen=True)
class BucketInput:
    """One bucket of a dump to tokenize: its files, how many documents they hold, the output prefix."""

    name: str
    files: list[Path]
    documents: int
    prefix: Path


@dataclass(frozen=True)
class BucketTokens:
    """What tokenizing one bucket wrote, and how long it took."""

    documents: int
    tokens: int
    bytes: int
    order_wait_seconds: float  # how long encoding waited for DuckDB to order the documents
    seconds: float


def documents_in_id_order(
    con: duckdb.DuckDBPyConnection, files: list[Path], batch_rows: int
) -> pa.RecordBatchReader:
    """(id, text) batches of `batch_rows` documents, ordered by id. Returns once DuckDB has
    ordered the rows; the batches then stream from the sorted result."""
    relation = con.sql(load_sql("documents_by_id"), params={"files": [str(f) for f in files]})
    return relation.to_arrow_reader(batch_rows)


def tokenize_buckets(
    con: duckdb.DuckDBPyConnection,
    buckets: list[BucketInput],
    encoder: ParallelEncoder,
    token_dtype: np.dtype,
    batch_rows: int,
    progress: TokenProgress,
    log: Callable[[str], None],
    dump: str,
) -> dict[str, BucketTokens]:
    """Write every document of each bucket as `<prefix>.bin`, `.idx` and `.docs.parquet`.

    `progress` counts what is written; `log` receives DuckDB's progress while encoding waits for it.
    """
    written = {}
    with closing(_readers_in_id_order(con, buckets, batch_rows, log, dump)) as readers:
        for bucket, reader, waited in readers:
            started = time.monotonic() - waited
            where = f"Dump {dump}, bucket {bucket.name}"
            batches = _complete_batches(reader, con, bucket.files, where)
            try:
                documents, tokens = _write_bucket(batches, bucket.prefix, encoder, token_dtype, progress)
            except BrokenProcessPool as error:
                raise RuntimeError(
                    f"{where}: a tokenizer worker process died (killed for memory?). Fewer workers "
                    "or a smaller batch_size need less memory; nothing was published."
                ) from error
            written[bucket.name] = BucketTokens(
                documents=documents,
                tokens=tokens,
                bytes=sum(path.stat().st_size for path in token_files(bucket.prefix)),
                order_wait_seconds=waited,
                seconds=time.monotonic() - started,
            )
    return written


def _write_bucket(
    batches: Iterator[pa.RecordBatch],
    prefix: Path,
    encoder: ParallelEncoder,
    token_dtype: np.dtype,
    progress: TokenProgress,
) -> tuple[int, int]:
    """Encode the batches' texts in order; write the tokens and the ids. Returns (documents, tokens)."""
    for_texts, for_ids = tee(batches)  # buffers at most the batches in flight in the encoder
    with (
        IndexedDatasetWriter(prefix, token_dtype) as tokens_out,
        DocumentIndexWriter(prefix) as docs_out,
    ):
        encoded = encoder.encode(batch.column("text").to_pylist() for batch in for_texts)
        for batch, result in zip(for_ids, encoded):
            tokens_out.add_documents(result.tokens, result.lengths)
            docs_out.add(batch.column("id"), result.lengths)
            progress.add(batch.num_rows, result.tokens.size)
    return tokens_out.document_count, tokens_out.token_count


def _readers_in_id_order(
    con: duckdb.DuckDBPyConnection,
    buckets: list[BucketInput],
    batch_rows: int,
    log: Callable[[str], None],
    dump: str,
) -> Iterator[tuple[BucketInput, pa.RecordBatchReader, float]]:
    """(bucket, its ordered documents, seconds waited for them) in turn. Each bucket is ordered on
    a cursor of its own, the next one while the caller consumes this one; close the generator to
    stop early (a failure), which interrupts the ordering still running."""
    with ThreadPoolExecutor(1, thread_name_prefix="order-by-id") as sorter:

        def start(bucket: BucketInput) -> tuple[duckdb.DuckDBPyConnection, Future]:
            cursor = con.cursor()
            return cursor, sorter.submit(documents_in_id_order, cursor, bucket.files, batch_rows)

        pending = start(buckets[0]) if buckets else None
        try:
            for i, bucket in enumerate(buckets):
                cursor, running = pending
                began = time.monotonic()
                label = f"ordering {dump} bucket {bucket.name} by id"
                reporter = ProgressReporter(log, label, bucket.documents)
                reader = wait_with_progress(cursor, running, reporter)
                waited = time.monotonic() - began
                pending = start(buckets[i + 1]) if i + 1 < len(buckets) else None
                with closing(cursor):
                    yield bucket, reader, waited
        finally:
            if pending is not None:
                cursor, running = pending
                running.cancel()
                cursor.interrupt()
                wait([running])
                cursor.close()


def _complete_batches(
    reader: pa.RecordBatchReader, con: duckdb.DuckDBPyConnection, files: list[Path], where: str
) -> Iterator[pa.RecordBatch]:
    """The reader's batches; a row without id or text stops the run with the files that hold it."""
    for batch in reader:
        if batch.column("id").null_count or batch.column("text").null_count:
            raise ValueError(f"{where}: {_describe_missing_values(con, files)}")
        yield batch


def _describe_missing_values(con: duckdb.DuckDBPyConnection, files: list[Path]) -> str:
    # on a cursor of its own: other cursors of `con` hold open, sorted results
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
