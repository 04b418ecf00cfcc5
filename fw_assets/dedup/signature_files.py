"""The files of the `minhash` asset, their format: writer, reader and checks. Named for what they
hold, signatures, so that "minhash" means one thing in the package, the asset; the signing itself
is signing.py's. "A minhash file" below is the asset's `<dump>.parquet`.

`<dump>.parquet` has columns `id`, `bucket`, `score`, `band_keys` (one uint64 per band, null for
a document with fewer words than the n-gram) and `text_start` (the text's first 80 characters,
shown beside the decisions' example pairs without decoding any dump's texts again).

Beside it, for the dumps decided later, two checksummed Arrow files read in place
(fw_assets.dedup.checked_arrow): `<dump>.signatures.arrow`, the `id` and `signature` of the same
rows (the low bits of every hash, for verifying candidates: 224 bytes a document at 112 x 16
bits, against 896 for the full 64-bit hashes), of which a later dump reads only the rows sharing
a key; and `<dump>.keys.arrow`, the band keys sorted by key (fw_assets.dedup.sorted_keys).

All three carry the policy's signature fingerprint (which covers the files' columns) and the dump
in their metadata, so a file from another policy or an older version of this module is refused by
name instead of silently mixing signatures.

Documents are read in the order given (bucket, file, row) and written in that order; batches
are signed on `threads` threads but written in sequence, in row groups (record batches) of
ROW_GROUP_ROWS rows whatever the batches' sizes (row_groups.py), so the files are the same at any
thread count and batch size.
"""

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fw_assets.dedup.checked_arrow import CheckedArrow, CheckedArrowWriter, read_arrow_schema
from fw_assets.dedup.content_versions import ContentVersion
from fw_assets.dedup.minhash_policy import MinhashPolicy
from fw_assets.dedup.row_groups import in_row_groups, parquet_writer
from fw_assets.dedup.shingling import shingles
from fw_assets.dedup.signing import band_keys, compact, permutations, signatures_of
from fw_assets.dedup.sorted_keys import SORTED_KEYS_SCHEMA, write_sorted_keys
from fw_assets.lib.ordered_map import ordered_map
from fw_assets.lib.parquet_damage import footer_damaged, row_group_damaged
from fw_assets.paths import signatures_path, sorted_keys_path

FINGERPRINT_KEY = b"fw_assets.minhash.fingerprint"
DUMP_KEY = b"fw_assets.minhash.dump"
CONTENT_VERSION_KEY = b"fw_assets.minhash.content_version"  # in the sorted keys file
ROW_GROUP_ROWS = 65_536
TEXT_START_CHARS = 80


class MinhashFileError(ValueError):
    """A minhash file that cannot be used: unreadable, wrong columns, or another policy's."""


class BucketedFileError(ValueError):
    """A bucketed file that cannot be read whole; the message names it and the row group."""


def signed_schema(policy: MinhashPolicy, dump: str) -> pa.Schema:
    """A signed batch: the minhash file's columns and the signature, split on writing."""
    return pa.schema(
        [
            ("id", pa.string()),
            ("bucket", pa.string()),
            ("score", pa.float64()),
            ("band_keys", pa.list_(pa.uint64())),
            ("signature", pa.binary(policy.signature_bytes)),
            ("text_start", pa.string()),
        ],
        metadata={
            FINGERPRINT_KEY: policy.signature_fingerprint().encode(),
            DUMP_KEY: dump.encode(),
        },
    )


def minhash_schema(policy: MinhashPolicy, dump: str) -> pa.Schema:
    signed = signed_schema(policy, dump)
    return signed.remove(signed.get_field_index("signature"))


def signatures_schema(policy: MinhashPolicy, dump: str) -> pa.Schema:
    signed = signed_schema(policy, dump)
    return pa.schema([signed.field("id"), signed.field("signature")], metadata=signed.metadata)


@dataclass(frozen=True)
class MinhashSummary:
    documents: int
    without_shingles: int  # fewer words than the n-gram: never a duplicate


def write_minhash_file(
    con: duckdb.DuckDBPyConnection,
    sources: Sequence[tuple[str, Path]],
    output: Path,
    dump: str,
    policy: MinhashPolicy,
    threads: int = 1,
    batch_rows: int = 2048,
) -> MinhashSummary:
    """Sign every document of `sources` ((bucket, bucketed parquet file) pairs) into `output`, and
    sort its band keys into the keys file beside it (with `con`)."""
    schema = signed_schema(policy, dump)
    a, b = permutations(policy)

    def sign(batch: tuple[str, pa.RecordBatch]) -> pa.RecordBatch:
        bucket, rows = batch
        return _signed_batch(bucket, rows, policy, a, b, schema)

    without = 0

    def counted(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        nonlocal without
        for batch in batches:
            without += batch.column("band_keys").null_count
            yield batch

    signed = ordered_map(sign, _batches(sources, batch_rows), threads, in_flight=2 * threads)
    documents = write_signed(con, output, policy, dump, counted(signed))
    return MinhashSummary(documents, without)


def write_signed(
    con: duckdb.DuckDBPyConnection,
    output: Path,
    policy: MinhashPolicy,
    dump: str,
    batches: Iterable[pa.RecordBatch],
) -> int:
    """Write signed batches (`signed_schema`) as the minhash file `output`, its signatures file,
    and its sorted keys (with `con`); returns the documents written."""
    schema, parquet_schema = signed_schema(policy, dump), minhash_schema(policy, dump)
    signatures = signatures_schema(policy, dump)
    version = ContentVersion()
    with (
        parquet_writer(output, parquet_schema) as parquet,
        CheckedArrowWriter(signatures_path(output), signatures) as arrow,
    ):
        for table in in_row_groups(batches, schema, ROW_GROUP_ROWS):
            parquet.write_table(table.select(parquet_schema.names), row_group_size=ROW_GROUP_ROWS)
            arrow.write(table.select(signatures.names))
            version.add(table)
    metadata = {**schema.metadata, CONTENT_VERSION_KEY: version.hexdigest().encode()}
    write_sorted_keys(con, output, sorted_keys_path(output), metadata)
    return version.documents


def _batches(
    sources: Sequence[tuple[str, Path]], rows: int
) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Each file's rows, a row group at a time, so that a damaged page is named with its group."""
    for bucket, path in sources:
        try:
            file = pq.ParquetFile(path)
        except (OSError, pa.ArrowException) as error:
            raise BucketedFileError(footer_damaged("bucketed file", path, error)) from error
        groups = file.metadata.num_row_groups
        for group in range(groups):
            try:
                batches = list(file.iter_batches(rows, row_groups=[group], columns=["id", "text", "score"]))
            except (OSError, pa.ArrowException) as error:
                raise BucketedFileError(row_group_damaged("bucketed file", path, group, groups, error)) from error
            for batch in batches:
                yield bucket, batch


def _signed_batch(
    bucket: str,
    rows: pa.RecordBatch,
    policy: MinhashPolicy,
    a: np.ndarray,
    b: np.ndarray,
    schema: pa.Schema,
) -> pa.RecordBatch:
    grams = shingles(rows.column("text"), policy.ngram)
    signatures = signatures_of(grams, a, b)
    signed = grams.counts() > 0
    keys = band_keys(signatures, policy)
    key_lists = pa.ListArray.from_arrays(
        pa.array(np.arange(0, keys.size + 1, policy.bands, dtype=np.int32)),
        pa.array(keys.ravel()),
        mask=pa.array(~signed),
    )
    raw = compact(signatures, policy.signature_bits)
    validity = pa.py_buffer(np.packbits(signed, bitorder="little").tobytes())
    signature = pa.Array.from_buffers(
        schema.field("signature").type, len(raw), [validity, pa.py_buffer(raw.tobytes())],
        null_count=int((~signed).sum()),
    )
    return pa.record_batch(
        [
            rows.column("id"),
            pa.array([bucket] * rows.num_rows, pa.string()),
            rows.column("score"),
            key_lists,
            signature,
            pc.utf8_slice_codeunits(rows.column("text"), 0, TEXT_START_CHARS),
        ],
        schema=schema,
    )


def check_minhash_file(path: Path, policy: MinhashPolicy, dump: str) -> None:
    """Raise MinhashFileError naming the file unless it and the two files beside it are readable
    minhash files of `dump` written under `policy`."""
    _check_file(path, pq.read_schema, minhash_schema(policy, ""), policy, dump)
    _check_file(signatures_path(path), read_arrow_schema, signatures_schema(policy, ""), policy, dump)
    _check_file(sorted_keys_path(path), read_arrow_schema, SORTED_KEYS_SCHEMA, policy, dump)


def content_version(path: Path) -> str:
    """The version of what a later dump's decisions read of the minhash file at `path`, whatever
    the order of its documents (fw_assets.dedup.content_versions), as written in its sorted keys
    file. A dump signed again from the same documents under the same policy gets the same version."""
    keys = sorted_keys_path(path)
    try:
        version = (read_arrow_schema(keys).metadata or {}).get(CONTENT_VERSION_KEY)
    except (OSError, pa.ArrowException) as error:
        raise MinhashFileError(f"{keys}: not a readable Arrow file ({error}); re-materialize its minhash") from error
    if version is None:
        raise MinhashFileError(f"{keys}: written before content versions; re-materialize its minhash")
    return version.decode()


def read_signatures(path: Path, columns: Sequence[str] = ("id", "signature")) -> pa.Table:
    """The (id, signature) table beside the minhash file at `path`, or its `columns`, memory-mapped,
    their digests verified (its columns are check_minhash_file's to check); a damaged file raises
    ValueError naming it."""
    return mapped_signatures(path, columns).table


def mapped_signatures(path: Path, columns: Sequence[str] = ("id", "signature")) -> CheckedArrow:
    """read_signatures' table with the means to let the pages read go again (CheckedArrow)."""
    return CheckedArrow(signatures_path(path), columns)


def rows_with_ids(path: Path, wanted: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """The rows of the minhash file at `path` whose id is in `wanted`, and their ids, found in the
    ids beside it (read in place, their digests verified; the signatures are not read)."""
    ids = read_signatures(path, ["id"]).column("id")
    rows = np.flatnonzero(pc.is_in(ids, value_set=wanted).to_numpy(zero_copy_only=False))
    return rows, ids.take(rows)


def _check_file(
    path: Path, read_schema: Callable[[Path], pa.Schema], expected: pa.Schema, policy: MinhashPolicy, dump: str
) -> None:
    try:
        found_schema = read_schema(path)
        metadata, schema = found_schema.metadata or {}, found_schema.remove_metadata()
    except (OSError, pa.ArrowException) as error:
        message = f"{path}: not a readable minhash file ({error}); re-materialize its minhash"
        raise MinhashFileError(message) from error
    # The fingerprint first: it covers the columns, so an older file's missing column is named as
    # what it is, another policy or file version, with the way out.
    found = metadata.get(FINGERPRINT_KEY, b"none").decode()
    if found != policy.signature_fingerprint():
        raise MinhashFileError(
            f"{path}: written with MinHash policy {found} (parameters and file version), "
            f"this run uses {policy.signature_fingerprint()};"
            " re-materialize its dump's minhash with the current policy"
        )
    expected = expected.remove_metadata()
    if not schema.equals(expected):
        raise MinhashFileError(f"{path}: columns {schema} differ from a minhash file's {expected}")
    found_dump = metadata.get(DUMP_KEY, b"").decode()
    if found_dump != dump:
        raise MinhashFileError(f"{path}: holds the minhash of {found_dump!r}, expected {dump!r}")
