"""Tokenizing the buckets of one dump, apart from Dagster so tests and benchmarks call it directly.

Encode in any order, write in id order: a bucket's documents stream in whatever order DuckDB reads
them through the encoder into a scratch token file, and each one's (id, token offset, token count)
into a scratch keys parquet. DuckDB orders only the keys by id (~70 bytes a document, not its
text); the tokens are then gathered from the scratch file in that order, each followed by the
end-of-document token, into `<prefix>.bin`/`.idx` and the ids into `<prefix>.docs.parquet`. The
scratch files go with the bucket.
"""

import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fw_assets.formats.doc_index import DocumentIndexWriter
from fw_assets.formats.indexed_dataset import IndexedDatasetWriter
from fw_assets.lib.parquet_damage import naming_damaged_row_groups
from fw_assets.lib.sql import load_sql
from fw_assets.lib.windows import windows
from fw_assets.paths import token_files
from fw_assets.tokenizing.encode import ParallelEncoder
from fw_assets.tokenizing.oracle import OracleSample
from fw_assets.tokenizing.token_progress import TokenProgress

# The statements run here, for the code version of `tokenized`.
STEPS_SQL = ("documents_to_tokenize", "token_keys_by_id", "documents_missing_values")

# A scratch keys row: where one document's tokens lie in the bucket's scratch token file.
# text_hash only breaks ties between rows sharing an id (see sql/documents_to_tokenize.sql).
KEYS_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text_hash", pa.uint64()),
        ("token_offset", pa.int64()),
        ("token_count", pa.int64()),
    ]
)
# Tokens are gathered into the output files this many bytes at a time (a longer document alone).
GATHER_BYTES = 64 * 2**20
# Text encoded at a time, at most (see _slices_of_bounded_text).
ENCODE_TEXT_BYTES = 6 * 2**20
# Ordered keys fetched from DuckDB at a time (a few MB).
KEY_BATCH_ROWS = 1 << 16


@dataclass(frozen=True)
class TokenFormat:
    """What a document becomes in the token files: its tokens as `dtype`, then `eod_id`."""

    dtype: np.dtype
    eod_id: int


@dataclass(frozen=True)
class BucketInput:
    """One bucket of a dump to tokenize: its files, how many documents of them the dump's dedup
    decisions keep (only those are tokenized), the output prefix."""

    name: str
    files: list[Path]
    documents: int
    prefix: Path
    decisions: Path


@dataclass(frozen=True)
class BucketTokens:
    """What tokenizing one bucket wrote, and how long it took."""

    documents: int
    tokens: int
    bytes: int
    encoding_seconds: float  # reading and encoding the documents into the scratch files
    ordering_seconds: float  # ordering the keys by id and copying the tokens into the output
    blank: "BlankTexts" = field(default_factory=lambda: BlankTexts())

    @property
    def seconds(self) -> float:
        return self.encoding_seconds + self.ordering_seconds


@dataclass
class BlankTexts:
    """Documents dropped because their text is empty, whitespace or invisible characters only:
    tokenized, each would be a training document of nothing but the end-of-document token."""

    documents: int = 0
    example_ids: list[str] = field(default_factory=list)

    def drop_from(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch without its blank texts (marked by documents_to_tokenize.sql), counted."""
        blank = batch.column("blank")
        dropped = pc.sum(blank).as_py() or 0
        if not dropped:
            return batch
        self.documents += dropped
        self.example_ids += batch.filter(blank).column("id").to_pylist()[: 5 - len(self.example_ids)]
        return batch.filter(pc.invert(blank))


@dataclass(frozen=True)
class ScratchFiles:
    """One bucket's encoded documents in the order they were read."""

    tokens: Path  # raw tokens in the output dtype, back to back
    keys: Path  # parquet of KEYS_SCHEMA

    def remove(self) -> None:
        self.tokens.unlink(missing_ok=True)
        self.keys.unlink(missing_ok=True)


@dataclass(frozen=True)
class EncodedBucket:
    """A bucket encoded into its scratch files, to be ordered by id."""

    bucket: BucketInput
    files: ScratchFiles
    documents: int
    tokens: int  # end-of-document tokens aside
    blank: "BlankTexts"
    encoding_seconds: float


def tokenize_buckets(
    con: duckdb.DuckDBPyConnection,
    buckets: list[BucketInput],
    encoder: ParallelEncoder,
    oracle: OracleSample,
    token_format: TokenFormat,
    batch_rows: int,
    progress: TokenProgress,
    log: Callable[[str], None],
    dump: str,
    scratch: Path,
    gather_bytes: int = GATHER_BYTES,
) -> dict[str, BucketTokens]:
    """Write every document of each bucket as `<prefix>.bin`, `.idx` and `.docs.parquet`, in id order.

    Buckets are encoded largest first, each one ordered by id (on a thread of its own) while the
    next is encoded: only the last, smallest bucket's ordering keeps the encoder waiting. So
    `scratch` (an unpublished folder) holds two buckets' scratch files at most, about the size of
    their tokens. `oracle` compares its sample of the documents with tiktoken as they are encoded
    (TokenMismatch on a difference). `progress` counts what is encoded; `log` gets a line per
    bucket on its ordering.
    """
    written = {}

    def collect(ordering: Future[BucketTokens], name: str) -> None:
        written[name] = tokens = ordering.result()
        log(
            f"Dump {dump}, bucket {name}: {tokens.documents:,} documents ordered by id and written "
            f"in {tokens.ordering_seconds:,.1f}s"
        )

    with ThreadPoolExecutor(1, thread_name_prefix="order-by-id") as orderer:
        ordering: tuple[Future[BucketTokens], str] | None = None
        for bucket in sorted(buckets, key=lambda b: b.documents, reverse=True):
            encoded = _encode_bucket(con, bucket, scratch, encoder, oracle, batch_rows, progress, dump)
            try:
                if ordering is not None:
                    collect(*ordering)  # raises what failed the bucket before (disk full, ...)
            except BaseException:
                encoded.files.remove()  # never to be ordered
                raise
            future = orderer.submit(_order_bucket, con, encoded, token_format, gather_bytes)
            ordering = (future, bucket.name)
        if ordering is not None:
            collect(*ordering)
    return {bucket.name: written[bucket.name] for bucket in buckets}


def _encode_bucket(
    con: duckdb.DuckDBPyConnection,
    bucket: BucketInput,
    scratch: Path,
    encoder: ParallelEncoder,
    oracle: OracleSample,
    batch_rows: int,
    progress: TokenProgress,
    dump: str,
) -> EncodedBucket:
    """The bucket's documents, but the blank ones, encoded into its scratch files (removed again
    if encoding fails)."""
    scratch.mkdir(parents=True, exist_ok=True)
    files = ScratchFiles(scratch / f"{bucket.name}.tokens", scratch / f"{bucket.name}.keys.parquet")
    began = time.monotonic()
    blank = BlankTexts()
    try:
        documents, tokens = _encode_in_read_order(
            con, bucket, files, encoder, oracle, batch_rows, progress, f"Dump {dump}, bucket {bucket.name}", blank
        )
    except BaseException:
        files.remove()
        raise
    progress.add(blank.documents, 0)
    return EncodedBucket(bucket, files, documents, tokens, blank, time.monotonic() - began)


def _order_bucket(
    con: duckdb.DuckDBPyConnection, encoded: EncodedBucket, token_format: TokenFormat, gather_bytes: int
) -> BucketTokens:
    """Write an encoded bucket's token files in id order; its scratch files go, whatever happens."""
    began = time.monotonic()
    try:
        _write_in_id_order(con, encoded.files, encoded.bucket.prefix, token_format, gather_bytes)
    finally:
        encoded.files.remove()
    return BucketTokens(
        documents=encoded.documents,
        tokens=encoded.tokens + encoded.documents,  # each document's end-of-document token
        bytes=sum(path.stat().st_size for path in token_files(encoded.bucket.prefix)),
        encoding_seconds=encoded.encoding_seconds,
        ordering_seconds=time.monotonic() - began,
        blank=encoded.blank,
    )


def _encode_in_read_order(
    con: duckdb.DuckDBPyConnection,
    bucket: BucketInput,
    files: ScratchFiles,
    encoder: ParallelEncoder,
    oracle: OracleSample,
    batch_rows: int,
    progress: TokenProgress,
    where: str,
    blank: BlankTexts,
) -> tuple[int, int]:
    """Encode the bucket's documents but the blank ones (counted in `blank`) into its scratch
    files. Returns (documents, tokens)."""
    parameters = {
        "files": [str(f) for f in bucket.files], "decisions": str(bucket.decisions), "bucket": bucket.name,
    }
    remedy = "Materialize `bucketed` of this dump again (it is rebuilt from the source), then `tokenized`."
    with (
        con.cursor() as cursor,
        naming_damaged_row_groups(bucket.files, ("id", "text", "score"), "bucketed file", where, remedy),
    ):
        try:
            # a relation's reader streams; a DB-API result's (cursor.execute) would hold every row
            reader = cursor.sql(load_sql("documents_to_tokenize"), params=parameters).to_arrow_reader(batch_rows)
            batches = _complete_batches(reader, con, bucket.files, where, blank)
            return _write_scratch(batches, files, encoder, oracle, progress, where)
        except BrokenProcessPool as error:
            raise RuntimeError(
                f"{where}: a tokenizer worker process died (killed for memory?). Fewer workers "
                "or a smaller batch_size need less memory; nothing was published."
            ) from error


def _write_scratch(
    batches: Iterator[pa.RecordBatch],
    files: ScratchFiles,
    encoder: ParallelEncoder,
    oracle: OracleSample,
    progress: TokenProgress,
    where: str,
) -> tuple[int, int]:
    """Encode the batches' texts, compare the oracle's sample of them; append the tokens and each
    document's keys in the same order. Returns (documents, tokens)."""
    in_flight: deque[pa.RecordBatch] = deque()  # the batches whose texts the encoder has

    def texts() -> Iterator[list[str]]:
        # not itertools.tee: it holds its items in blocks of 57, here up to 57 batches of texts
        for batch in batches:
            in_flight.append(batch)
            yield batch.column("text").to_pylist()

    documents = tokens = 0
    with (
        open(files.tokens, "wb") as tokens_out,
        # read once, by this step: no compression, no dictionary of unique ids
        pq.ParquetWriter(files.keys, KEYS_SCHEMA, compression="none", use_dictionary=False) as keys_out,
    ):
        for result in encoder.encode(texts()):
            batch = in_flight.popleft()
            oracle.compare(batch, result, where)
            tokens_out.write(memoryview(result.tokens))
            ends = tokens + np.cumsum(result.lengths)
            keys = [
                batch.column("id").cast(pa.string()),
                batch.column("text_hash"),
                pa.array(ends - result.lengths),
                pa.array(result.lengths),
            ]
            keys_out.write_batch(pa.record_batch(keys, schema=KEYS_SCHEMA))
            documents += batch.num_rows
            tokens += result.tokens.size
            progress.add(batch.num_rows, result.tokens.size + batch.num_rows)
    return documents, tokens


def _write_in_id_order(
    con: duckdb.DuckDBPyConnection,
    files: ScratchFiles,
    prefix: Path,
    token_format: TokenFormat,
    gather_bytes: int,
) -> None:
    """Gather each document's tokens from the scratch file into `<prefix>.*`, ordered by id, each
    followed by the end-of-document token."""
    budget = max(gather_bytes // token_format.dtype.itemsize, 1)
    with (
        con.cursor() as cursor,
        _ScratchTokens(files.tokens, token_format.dtype, budget) as scratch,
        IndexedDatasetWriter(prefix, token_format.dtype) as tokens_out,
        DocumentIndexWriter(prefix) as docs_out,
    ):
        ordered = cursor.sql(load_sql("token_keys_by_id"), params={"keys": str(files.keys)})
        for batch in ordered.to_arrow_reader(KEY_BATCH_ROWS):
            offsets = batch.column("token_offset").to_numpy()
            lengths = batch.column("token_count").to_numpy()
            for window in windows(lengths + 1, budget):
                tokens = scratch.gather_with_eod(offsets[window], lengths[window], token_format.eod_id)
                tokens_out.add_documents(tokens, lengths[window] + 1)
                docs_out.add(batch.column("id")[window], lengths[window] + 1)


class _ScratchTokens:
    """A bucket's scratch token file, to gather documents from in any order.

    One pread per document straight into one reused buffer: nothing of the file is mapped (mapped
    pages, the kernel maps whole folios of them around each access, would count as this process's
    memory up to the file's size), so memory is one window's, whatever the file's size; and the
    buffer's pages are zeroed by the kernel once, not for every window.
    """

    def __init__(self, path: Path, dtype: np.dtype, window: int) -> None:
        self.path = path
        self.dtype = dtype
        self._window = window  # tokens a gather holds (a longer document alone)
        self._stream = open(path, "rb")
        self._buffer = np.empty(0, dtype)

    def gather_with_eod(self, offsets: np.ndarray, lengths: np.ndarray, eod_id: int) -> np.ndarray:
        """The documents at these token offsets, each followed by `eod_id`, back to back: a view
        of the buffer, valid until the next call."""
        size = int(lengths.sum()) + lengths.size
        if size > self._buffer.size:  # a whole window's at once: windows differ by a few tokens
            self._buffer = np.empty(max(size, self._window), self.dtype)
        gathered = self._buffer[:size]
        into = memoryview(gathered).cast("B")
        at, itemsize = 0, self.dtype.itemsize
        for offset, nbytes in zip((offsets * itemsize).tolist(), (lengths * itemsize).tolist()):
            if os.preadv(self._stream.fileno(), [into[at : at + nbytes]], offset) != nbytes:
                raise EOFError(f"{self.path}: fewer than {nbytes} bytes at byte {offset}")
            at += nbytes + itemsize  # the end-of-document token's place
        gathered[np.cumsum(lengths + 1) - 1] = eod_id
        return gathered

    def __enter__(self) -> "_ScratchTokens":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stream.close()


def _complete_batches(
    reader: pa.RecordBatchReader,
    con: duckdb.DuckDBPyConnection,
    files: list[Path],
    where: str,
    blank: BlankTexts,
) -> Iterator[pa.RecordBatch]:
    """The reader's batches without blank texts; a row without id or text stops the run with the
    files that hold it."""
    for batch in reader:
        if batch.column("id").null_count or batch.column("text").null_count:
            raise ValueError(f"{where}: {_describe_missing_values(con, files)}")
        kept = blank.drop_from(batch)
        if kept.num_rows:
            yield from _slices_of_bounded_text(kept)


def _slices_of_bounded_text(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """The batch in consecutive slices of at most ENCODE_TEXT_BYTES of text (a longer text alone).

    A batch's tokens come back as one buffer, up to 4 bytes a text byte: past glibc's largest
    mmap threshold (32 MB) each would be fresh pages, mapped and zeroed for every batch.
    """
    sizes = pc.binary_length(batch.column("text")).to_numpy(zero_copy_only=False)
    for window in windows(sizes, ENCODE_TEXT_BYTES):
        yield batch.slice(window.start, window.stop - window.start)


def _describe_missing_values(con: duckdb.DuckDBPyConnection, files: list[Path]) -> str:
    # on a cursor of its own: another cursor of `con` is streaming the documents
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
