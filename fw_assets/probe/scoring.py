"""Scoring one dump's token files with a probe, apart from Dagster so tests and benchmarks call it.

Output per bucket: `<bucket>/<dump>.parquet`, row i for document i of the bucket's token files
(their `.docs.parquet`, id order): `id`, `tokens` (tokens the probe scored), `loss` (mean negative
log-likelihood per token, nats), `bits_per_byte` (summed NLL in bits over the text's UTF-8 bytes:
comparable across tokenizers) and `truncated` (the model probe scored only a prefix).
"""

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from fw_assets.formats.doc_index import read_document_index
from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.formats.probe_losses import LOSS_SCHEMA
from fw_assets.lib.parquet_damage import naming_damaged_row_groups
from fw_assets.lib.sql import load_sql
from fw_assets.lib.windows import windows
from fw_assets.lib.writers import FixedRowGroups, KeepOnSuccess
from fw_assets.paths import bin_path, docs_path
from fw_assets.probe.ngram import REFERENCE_TOKENS, BigramModel, document_losses, reference_halves

STEPS_SQL = ("probe_texts",)

ROW_GROUP_ROWS = 1 << 17  # fixed, so a file's bytes depend only on its rows
WINDOW_TOKENS = 1 << 21  # tokens the built-in probe reads and scores at a time (~16 MB as int64)
TEXT_BATCH_ROWS = 256  # texts the model probe fetches and encodes at a time


@dataclass(frozen=True)
class BucketDocuments:
    """One bucket's token files to score, and where its losses go."""

    name: str
    prefix: Path  # the published token files' prefix
    output: Path  # the staged loss file
    texts: list[Path]  # the bucket's published parquet files (the model probe reads the texts)


@dataclass(frozen=True)
class BucketLosses:
    """What scoring one bucket wrote."""

    documents: int
    tokens: int
    truncated: int
    seconds: float


class LossWriter(KeepOnSuccess):
    """Streams loss rows into one parquet file; the file exists only once finished."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._rows = FixedRowGroups(path, LOSS_SCHEMA, ROW_GROUP_ROWS, compression="zstd", write_page_checksum=True)
        self.documents = self.tokens = self.truncated = 0

    def add(
        self, ids: pa.Array, tokens: np.ndarray, nll: np.ndarray, nbytes: np.ndarray, truncated: np.ndarray
    ) -> None:
        """Rows of documents that summed `nll` nats over `tokens` tokens and `nbytes` text bytes."""
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = nll / tokens
            bits = nll / np.log(2) / nbytes
        self._rows.write(
            pa.table(
                [ids.cast(pa.string()), tokens.astype(np.int64), loss, bits, truncated.astype(bool)], schema=LOSS_SCHEMA
            )
        )
        self.documents += len(ids)
        self.tokens += int(tokens.sum())
        self.truncated += int(truncated.sum())

    def finish(self) -> None:
        self._rows.finish()

    def abort(self) -> None:
        self._rows.abort()


# --- the built-in probe ------------------------------------------------------------------------


def score_with_bigrams(
    buckets: list[BucketDocuments], vocab_size: int, eod_id: int, byte_lengths: np.ndarray
) -> tuple[dict[str, BucketLosses], str]:
    """Fit the two reference models on the dump (fw_assets.probe.ngram) and score every document.
    Returns each bucket's figures and the sha256 of the reference sample's tokens."""
    ids = {b.name: read_document_index(b.prefix, columns=["id"]).column("id") for b in buckets}
    halves = {name: reference_halves(bucket_ids) for name, bucket_ids in ids.items()}
    digest = hashlib.sha256()
    models = []
    for half in (0, 1):
        documents = _reference_documents(buckets, halves, half, digest)
        models.append(BigramModel.fit(documents, vocab_size, eod_id))
    written = {}
    for bucket in buckets:
        began = time.monotonic()
        with LossWriter(bucket.output) as out:
            for window_ids, tokens, lengths, half in _windows(bucket, ids[bucket.name], halves[bucket.name]):
                nll = document_losses(models[0], tokens, lengths, eod_id)
                in_a = half == 0  # half A's documents: scored by model B, which never saw them
                if in_a.any():
                    nll[in_a] = document_losses(models[1], tokens[np.repeat(in_a, lengths)], lengths[in_a], eod_id)
                nbytes = np.add.reduceat(byte_lengths[tokens], np.concatenate([[0], np.cumsum(lengths)[:-1]]))
                out.add(window_ids, lengths, nll, nbytes, np.zeros(len(lengths), bool))
        written[bucket.name] = BucketLosses(out.documents, out.tokens, 0, time.monotonic() - began)
    return written, digest.hexdigest()


def _reference_documents(
    buckets: list[BucketDocuments], halves: dict[str, np.ndarray], half: int, digest
) -> Iterator[np.ndarray]:
    """Half `half`'s documents, buckets in order, documents in id order, until REFERENCE_TOKENS."""
    taken = 0
    for bucket in buckets:
        reader = IndexedDatasetReader(bucket.prefix)
        for document in np.flatnonzero(halves[bucket.name] == half):
            tokens = np.asarray(reader[int(document)])
            digest.update(tokens.astype("<i8").tobytes())
            yield tokens
            taken += len(tokens)
            if taken >= REFERENCE_TOKENS:
                return


def _windows(
    bucket: BucketDocuments, ids: pa.ChunkedArray, halves: np.ndarray
) -> Iterator[tuple[pa.ChunkedArray, np.ndarray, np.ndarray, np.ndarray]]:
    """Consecutive documents of about WINDOW_TOKENS tokens (a longer one alone), read from `.bin`
    with one read each: (ids, tokens back to back, lengths, reference halves)."""
    reader = IndexedDatasetReader(bucket.prefix)
    lengths = reader.sequence_lengths.astype(np.int64)
    for window in windows(lengths, WINDOW_TOKENS):
        offset = int(reader.sequence_pointers[window.start])
        count = int(lengths[window].sum())
        tokens = np.fromfile(bin_path(bucket.prefix), reader.dtype, count, offset=offset)
        yield ids[window], tokens.astype(np.int64), lengths[window], halves[window]


def tiktoken_byte_lengths(encoding_name: str, vocab_size: int) -> np.ndarray:
    """UTF-8 bytes each token id stands for (0 for special tokens and unused ids)."""
    import tiktoken  # here: only the built-in probe's step needs it

    encoding = tiktoken.get_encoding(encoding_name)
    special = set(encoding.special_tokens_set)
    lengths = np.zeros(vocab_size, np.int64)
    for token in range(vocab_size):
        try:
            piece = encoding.decode_single_token_bytes(token)
        except KeyError:
            continue
        lengths[token] = 0 if piece.decode("utf-8", "replace") in special else len(piece)
    return lengths


# --- the model probe ---------------------------------------------------------------------------


def score_with_model(
    con: duckdb.DuckDBPyConnection,
    buckets: list[BucketDocuments],
    model,
    log: Callable[[str], None],
    dump: str,
) -> dict[str, BucketLosses]:
    """Score each bucket's kept documents (the ids of its token files) with `model` (a
    fw_assets.probe.causal_lm.CausalLM), reading their texts from the bucketed files on the
    model's reading thread, ahead of its device. The texts come in read order; the rows (about 60
    bytes a document) are ordered by id before writing. A damaged bucketed file is a DamagedInput
    naming it and its row group."""
    written = {}
    remedy = "Materialize `bucketed` of this dump again (it is rebuilt from the source), then its chain."
    for bucket in buckets:
        began = time.monotonic()
        parameters = {"files": [str(f) for f in bucket.texts], "docs": str(docs_path(bucket.prefix))}
        scored = []
        where = f"Dump {dump}, bucket {bucket.name}"
        with (
            con.cursor() as cursor,
            naming_damaged_row_groups(bucket.texts, ("id", "text"), "bucketed file", where, remedy),
        ):
            reader = cursor.sql(load_sql("probe_texts"), params=parameters).to_arrow_reader(TEXT_BATCH_ROWS)
            chunks = ((batch.column("id"), batch.column("text").to_pylist()) for batch in reader)
            for ids, (tokens, nll, nbytes, truncated) in model.score_chunks(chunks):
                scored.append(pa.table({"id": pa.concat_arrays(ids), "tokens": tokens, "nll": nll, "bytes": nbytes,
                                        "truncated": truncated}))
        table = pa.concat_tables(scored).sort_by("id") if scored else None
        with LossWriter(bucket.output) as out:
            if table is not None:
                columns = [table.column(c).to_numpy() for c in ("tokens", "nll", "bytes", "truncated")]
                out.add(table.column("id").combine_chunks(), *columns)
        written[bucket.name] = BucketLosses(out.documents, out.tokens, out.truncated, time.monotonic() - began)
        log(f"bucket {bucket.name}: {out.documents:,} documents scored in {time.monotonic() - began:,.1f}s")
    return written
