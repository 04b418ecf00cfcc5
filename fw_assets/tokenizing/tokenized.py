"""`tokenized`: each bucket of a dump as Megatron token files, one partition per dump."""

import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow.parquet as pq

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.contracts.asset_checks import (
    ContractReport,
    Events,
    check_specs,
    unchanged_materialization,
    unchanged_output,
)
from fw_assets.crawl_order import made_with
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.formats.indexed_dataset import optimal_token_dtype
from fw_assets.formats.lineage import checked_generation
from fw_assets.lib.disk import SpaceNeed
from fw_assets.lib.markdown import table
from fw_assets.lib.publish import data_version, every_file, input_entry, staged_publication, trusted_record
from fw_assets.lib.versions import code_version
from fw_assets.partitions import PER_DUMP_KEPT
from fw_assets.paths import (
    dedup_path,
    docs_path,
    generation_record_path,
    publication_name,
    recorded_bucket_files,
    token_files,
    token_prefix,
    tokenizer_dir,
)
from fw_assets.resources import FineWebStorage, Warehouse
from fw_assets.run_health import TOKENIZER_POOL, asset_code_version, heavy_slot, writing_step
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.tokenizing.contract import RECONCILIATION_SQL, TOKENIZED_CHECKS, check_tokenized, kept_per_bucket
from fw_assets.tokenizing.encode import ParallelEncoder
from fw_assets.tokenizing.oracle import OracleSample
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.token_progress import TokenProgress
from fw_assets.tokenizing.tokenize_buckets import STEPS_SQL, BucketInput, BucketTokens, TokenFormat, tokenize_buckets

# The code that decides the bytes of the token files, hashed into the code version. The tokenizer
# itself is configuration: its identity names the output folder and is recorded in every run.
SQL = (*STEPS_SQL, *RECONCILIATION_SQL)
MODULES = (
    *(f"fw_assets.tokenizing.{name}" for name in ("tokenizer", "encode", "tokenize_buckets", "contract")),
    "fw_assets.tokenizing.backends",
    "fw_assets.tokenizing.oracle",
    "fw_assets.formats.indexed_dataset",
    "fw_assets.formats.doc_index",
)


TOKENIZED_CHECK_SPECS = check_specs("tokenized", TOKENIZED_CHECKS)


@dg.asset(
    **PER_DUMP_KEPT,
    deps=[bucketed, deduplicated],
    # in the run of the dump's decisions, or after decisions made without it
    automation_condition=made_with(decisions=dg.AssetSelection.assets(deduplicated),
                                   needs=dg.AssetSelection.assets(bucketed, deduplicated)),
    code_version=code_version(sql=SQL, modules=MODULES),
    kinds={"duckdb", "numpy", "parquet"},
    check_specs=TOKENIZED_CHECK_SPECS,
    description="Each bucket of the dump as Megatron-LM token files: "
    "`tokenized/<tokenizer>/<bucket>/<dump>.bin` + `.idx` (one sequence per document, EOD appended, "
    "documents in id order) and `.docs.parquet` (document index -> source id, token count); "
    "only the documents the dump's dedup decisions keep; blank texts are dropped and counted.",
)
def tokenized(
    context: dg.AssetExecutionContext,
    storage: FineWebStorage,
    warehouse: Warehouse,
    tokenizer: TokenizerResource,
) -> Events:
    dump = context.partition_key
    # here first, without its backend (the workers load that): a bad configuration fails at once
    loaded = tokenizer.spec().reference().load()
    identity = loaded.identity()
    token_dtype = optimal_token_dtype(identity["vocab_size"])
    started = time.monotonic()
    root = storage.output_root
    bucketed_name, dedup_name = publication_name("bucketed", dump), publication_name("dedup", dump)
    with writing_step(context, root, _space_needed(root, dump, token_dtype)):
        now = _inputs(dump, trusted_record(root, bucketed_name), trusted_record(root, dedup_name), identity)
        if unchanged := unchanged_output(context, root, publication_name("tokenized", identity["name"], dump), now):
            yield unchanged_materialization(unchanged, TOKENIZED_CHECKS)
            return
        yield from _tokenize(context, storage, warehouse, tokenizer, loaded, started)


def _inputs(dump: str, bucketed_record: dict | None, dedup_record: dict | None, identity: dict) -> dict:
    """What a publication of the dump's token files records it was made from: the texts, the
    decisions, and the tokenizer (its identity)."""
    return {
        publication_name("bucketed", dump): input_entry(bucketed_record),
        publication_name("dedup", dump): input_entry(dedup_record),
        "tokenizer": identity,
    }


def _tokenize(
    context: dg.AssetExecutionContext, storage: FineWebStorage, warehouse: Warehouse, tokenizer: TokenizerResource,
    loaded, started: float,
) -> Events:
    """Encode the dump's kept documents, check the token files and publish them."""
    dump, root, log = context.partition_key, storage.output_root, context.log.info
    spec, identity = tokenizer.spec(), loaded.identity()
    name = identity["name"]
    token_dtype = optimal_token_dtype(identity["vocab_size"])
    workers, batch_rows = tokenizer.worker_count(), tokenizer.batch_rows()
    with (
        heavy_slot(context, root, TOKENIZER_POOL),
        staged_publication(root, publication_name("tokenized", name, dump), dump, log,
                           code_version=asset_code_version(context)) as staging,
        # every text and every decision is read: both are read whole
        checked_generation(root, publication_name("bucketed", dump), dump, log, every_file) as bucketed_record,
        checked_generation(root, publication_name("dedup", dump), dump, log, every_file) as dedup_record,
        ParallelEncoder(spec, workers) as encoder,  # starts on its own thread meanwhile
    ):
        buckets = _bucket_inputs(storage, dump, bucketed_record, dedup_record, staging.path)
        total = sum(b.documents for b in buckets)
        with warehouse.connect(staging.path) as con:
            backend_name, version, warning = encoder.backend()
            if warning:
                context.log.warning(f"Dump {dump}: {warning}")
            backend = f"{backend_name} {version}"
            context.log.info(
                f"Tokenizing {dump} ({total:,} documents in {len(buckets)} buckets) with {name} "
                f"(vocabulary {identity['vocab_size']:,}, {token_dtype}), encoded by {backend} "
                f"{encoder.placement()}"
            )
            progress = TokenProgress(context.log.info, f"tokenizing {dump}", total)
            oracle = OracleSample(loaded.oracle(), backend, total)
            # scratch files stay inside staging: never published, deleted with it whatever happens
            token_format = TokenFormat(token_dtype, identity["eod_id"])
            written = tokenize_buckets(
                con, buckets, encoder, oracle, token_format, batch_rows, progress, context.log.info,
                dump, scratch=staging.path / "scratch",
            )
            sidecars = {
                b: docs_path(staging.path / b / dump) if b in written and written[b].documents else None
                for b in (bucket.name for bucket in SEED_POLICY.buckets)
            }
            blank = {b: w.blank.documents for b, w in written.items()}
            decisions = dedup_path(root, dump)
            report = ContractReport(dump, "tokenized", [check_tokenized(con, decisions, sidecars, blank)])
        progress.report()
        _warn_of_blank_texts(context.log.warning, dump, written, total)
        yield from report.refuse_if_blocked()
        published = staging.publish(
            _moves(storage, name, dump, staging.path, written),
            _record_contents(written, identity),
            inputs=_inputs(dump, bucketed_record, dedup_record, identity),
        )
    yield report.materialization(
        {
            **_metadata(
                written, identity, str(token_dtype), workers, time.monotonic() - started,
                tokenizer_dir(storage.output_root, name),
            ),
            "tokenizer_backend": backend,
            "tiktoken_checked_documents": oracle.checked,
            "tiktoken_checked_share": round(oracle.share, 6),
            **warehouse.cores_metadata(),  # the DuckDB threads ordering the keys; usable_cores
        },
        data_version(published),
    )


# A token of cl100k and its kin stands for about 4 bytes of English text (other scripts: fewer, so
# more tokens); the scratch of the two buckets in flight (largest first) adds at most the largest
# bucket's tokens; a document's row in `.docs.parquet` and its `.idx` entries take about 64 bytes.
TEXT_BYTES_PER_TOKEN = 4
INDEX_BYTES_PER_DOCUMENT = 64


def _space_needed(root: Path, dump: str, token_dtype) -> SpaceNeed:
    """Estimated from the dump's text (its bucketed files' uncompressed `text` column, read from
    their footers), not from its parquet bytes: text that compresses well takes little parquet
    and as many tokens."""
    record = trusted_record(root, publication_name("bucketed", dump))
    buckets = recorded_bucket_files(root, record) if record else {}
    text = [sum(_text_bytes(path) for path in paths) for _, paths in buckets.values()]
    documents = sum(rows for rows, _ in buckets.values())
    per_text_byte = np.dtype(token_dtype).itemsize / TEXT_BYTES_PER_TOKEN
    return SpaceNeed(
        int((sum(text) + max(text, default=0)) * per_text_byte) + INDEX_BYTES_PER_DOCUMENT * documents,
        f"the dump's text as {np.dtype(token_dtype).name} tokens at about {TEXT_BYTES_PER_TOKEN} bytes of text a "
        "token, plus the largest bucket's while it is written; text of other scripts makes more tokens",
    )


def _text_bytes(path: Path) -> int:
    """The uncompressed bytes of a bucketed file's `text` column; 0 for a file not there yet (a
    killed publication, rolled back when the step starts reading)."""
    try:
        metadata = pq.read_metadata(path)
    except FileNotFoundError:
        return 0
    column = metadata.schema.names.index("text")
    return sum(metadata.row_group(g).column(column).total_uncompressed_size for g in range(metadata.num_row_groups))


def _bucket_inputs(
    storage: FineWebStorage, dump: str, record: dict | None, dedup_record: dict | None, staging: Path
) -> list[BucketInput]:
    """The dump's buckets that keep documents, as the published generation of bucketed records
    them and the dump's dedup decisions keep them, each with its staged output prefix. A bucket
    without kept documents has nothing to tokenize (see _moves); a bucket folder that is absent is
    never taken for an empty bucket."""
    root = storage.output_root
    if record is None:
        raise dg.Failure(
            f"Dump {dump}: bucketed was never published for this dump (no generation record at "
            f"{generation_record_path(root, publication_name('bucketed', dump))}). Materialize `bucketed` "
            "for this dump first; nothing was published."
        )
    if dedup_record is None:
        raise dg.Failure(
            f"Dump {dump}: its dedup decisions were never published (no generation record at "
            f"{generation_record_path(root, publication_name('dedup', dump))}). Materialize `deduplicated` "
            "for this dump first; nothing was published."
        )
    decisions = dedup_path(root, dump)
    kept = kept_per_bucket(decisions)
    buckets = []
    for bucket, (documents, paths) in recorded_bucket_files(root, record).items():
        if documents and kept.get(bucket, 0):
            prefix = staging / bucket / dump
            prefix.parent.mkdir(parents=True)
            buckets.append(BucketInput(bucket, paths, kept[bucket], prefix, decisions))
    return buckets


def _moves(
    storage: FineWebStorage, name: str, dump: str, staging: Path, written: dict[str, BucketTokens]
) -> dict[Path, Path | None]:
    """Every bucket's three files onto their published paths. A bucket without documents (none
    bucketed, or only blank texts) gets no files (Megatron cannot map an empty .bin), and an older
    output of it is removed."""
    moves: dict[Path, Path | None] = {}
    for bucket in [b.name for b in SEED_POLICY.buckets]:
        targets = token_files(token_prefix(storage.output_root, name, bucket, dump))
        has_documents = bucket in written and written[bucket].documents
        staged = token_files(staging / bucket / dump) if has_documents else [None] * len(targets)
        moves.update(zip(targets, staged))
    return moves


def _record_contents(written: dict[str, BucketTokens], identity: dict) -> dict:
    """What the generation record says: documents per bucket (0: no files, recorded as a fact),
    blank texts dropped, and the tokenizer."""
    return {
        "documents": {
            b.name: written[b.name].documents if b.name in written else 0 for b in SEED_POLICY.buckets
        },
        "blank_documents_dropped": {bucket: w.blank.documents for bucket, w in written.items()},
        "tokenizer": identity,
    }


# Above this share of a dump's documents, blank texts are worth a warning: FineWeb-Edu's extraction
# leaves next to none, so many of them mean a broken export upstream.
BLANK_WARNING_SHARE = 0.001


def _warn_of_blank_texts(
    warn: Callable[[str], None], dump: str, written: dict[str, BucketTokens], total: int
) -> None:
    dropped = sum(w.blank.documents for w in written.values())
    if total and dropped / total > BLANK_WARNING_SHARE:
        examples = [i for w in written.values() for i in w.blank.example_ids][:5]
        warn(
            f"Dump {dump}: dropped {dropped:,} of {total:,} documents ({dropped / total:.2%}, more than "
            f"{BLANK_WARNING_SHARE:.1%}) whose text is empty, whitespace or invisible characters only "
            f"(e.g. {', '.join(examples)}); check the export that produced this dump."
        )


def _metadata(
    written: dict[str, BucketTokens],
    identity: dict,
    token_dtype: str,
    workers: int,
    seconds: float,
    folder: Path,
) -> dict:
    documents = sum(w.documents for w in written.values())
    tokens = sum(w.tokens for w in written.values())
    metadata = {
        "dagster/row_count": documents,
        "documents": documents,
        "blank_documents_dropped": sum(w.blank.documents for w in written.values()),
        "tokens": tokens,
        "bytes_written": dg.MetadataValue.int(sum(w.bytes for w in written.values())),
        "seconds": round(seconds, 2),
        "encoding_seconds": round(sum(w.encoding_seconds for w in written.values()), 2),
        "ordering_seconds": round(sum(w.ordering_seconds for w in written.values()), 2),
        "tokens_per_second": round(tokens / max(seconds, 1e-9)),
        "documents_per_second": round(documents / max(seconds, 1e-9)),
        "workers": workers,
        "tokenizer": dg.MetadataValue.json(identity),
        "tokenizer_name": identity["name"],
        "vocab_size": identity["vocab_size"],
        "vocab_sha256": identity["vocab_sha256"],
        "token_dtype": token_dtype,
        "folder": dg.MetadataValue.path(str(folder)),
    }
    rows = []
    for bucket in [b.name for b in SEED_POLICY.buckets]:
        w = written.get(bucket, BucketTokens(0, 0, 0, 0.0, 0.0))
        metadata[f"documents_{bucket}"] = w.documents
        metadata[f"tokens_{bucket}"] = w.tokens
        metadata[f"bytes_{bucket}"] = w.bytes
        metadata[f"blank_dropped_{bucket}"] = w.blank.documents
        per_doc = w.tokens / w.documents if w.documents else 0.0
        rate = w.tokens / w.seconds if w.seconds else 0.0
        phases = (w.encoding_seconds, w.ordering_seconds)
        rows.append(
            (bucket, w.documents, w.tokens, per_doc, w.bytes, *phases, round(rate), w.blank.documents)
        )
    header = [
        "bucket", "documents", "tokens", "tokens/doc", "bytes", "encoding s", "ordering s",
        "tokens/s", "blank texts dropped",
    ]
    metadata["buckets"] = dg.MetadataValue.md(table(header, rows))
    return metadata
