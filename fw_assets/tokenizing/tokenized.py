"""`tokenized`: each bucket of a dump as Megatron token files, one partition per dump."""

import time
from pathlib import Path

import dagster as dg

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.layout import bucket_dump_dir, bucketed_files, token_files, token_prefix, tokenizer_dir
from fw_assets.lib.manifest import describe
from fw_assets.lib.markdown import table
from fw_assets.lib.publish import staged_publication
from fw_assets.lib.versions import code_version
from fw_assets.partitions import PER_DUMP
from fw_assets.policy import SEED_POLICY
from fw_assets.resources import DuckDBSteps, FineWebStorage
from fw_assets.tokenizing.encode import ParallelEncoder
from fw_assets.lib.indexed_dataset import optimal_token_dtype
from fw_assets.tokenizing.progress import TokenProgress
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.steps import STEPS_SQL, BucketInput, BucketTokens, tokenize_buckets


# The code that decides the bytes of the token files, hashed into the code version. The tokenizer
# itself is configuration: its identity names the output folder and is recorded in every run.
SQL = STEPS_SQL
MODULES = (
    *(f"fw_assets.tokenizing.{name}" for name in ("tokenizer", "encode", "steps")),
    "fw_assets.lib.indexed_dataset",
    "fw_assets.lib.doc_index",
)


@dg.asset(
    **PER_DUMP,
    deps=[bucketed],
    pool="tokenizer",
    code_version=code_version(sql=SQL, modules=MODULES),
    kinds={"duckdb", "numpy", "parquet"},
    description="Each bucket of the dump as Megatron-LM token files: "
    "tokenized/<tokenizer>/<bucket>/<dump>.bin + .idx (one sequence per document, EOD appended, "
    "documents in id order) and .docs.parquet (document index -> source id, token count).",
)
def tokenized(
    context: dg.AssetExecutionContext,
    storage: FineWebStorage,
    warehouse: DuckDBSteps,
    tokenizer: TokenizerResource,
) -> dg.MaterializeResult:
    dump = context.partition_key
    spec = tokenizer.spec()
    identity = spec.load().identity()  # loads it here first: a bad configuration fails at once
    name = identity["name"]
    token_dtype = optimal_token_dtype(identity["vocab_size"])
    workers, batch_rows = tokenizer.worker_count(), tokenizer.batch_rows()
    started = time.monotonic()
    with staged_publication(storage.output_root, f"tokenized-{name}-{dump}") as staging:
        buckets = _bucket_inputs(storage, dump, staging.path)
        total = sum(b.documents for b in buckets)
        context.log.info(
            f"Tokenizing {dump} ({total:,} documents in {len(buckets)} buckets) with {name} "
            f"(vocabulary {identity['vocab_size']:,}, {token_dtype}) in {workers} processes"
        )
        progress = TokenProgress(context.log.info, f"tokenizing {dump}", total)
        with ParallelEncoder(spec, workers) as encoder, warehouse.connect(staging.path) as con:
            # scratch files stay inside staging: never published, deleted with it whatever happens
            written = tokenize_buckets(
                con, buckets, encoder, token_dtype, batch_rows, progress, context.log.info, dump,
                scratch=staging.path / "scratch",
            )
        progress.report()
        staging.publish(_moves(storage, name, dump, staging.path, written))
    return dg.MaterializeResult(
        metadata=_metadata(
            written, identity, str(token_dtype), workers, time.monotonic() - started,
            tokenizer_dir(storage.output_root, name),
        )
    )


def _bucket_inputs(storage: FineWebStorage, dump: str, staging: Path) -> list[BucketInput]:
    """The dump's buckets that hold documents (counted from the published files' footers), each
    with its staged output prefix. A bucket without documents has nothing to tokenize: see _moves."""
    root = storage.output_root
    files = bucketed_files(root, dump, SEED_POLICY)
    if not any(files.values()):
        raise dg.Failure(
            f"Dump {dump}: no bucketed parquet under {bucket_dump_dir(root, '<bucket>', dump)}/ "
            "for any bucket. Materialize `bucketed` for this dump first; nothing was published."
        )
    buckets = []
    for bucket, paths in files.items():
        documents = sum(describe(path).rows for path in paths)
        if documents:
            prefix = staging / bucket / dump
            prefix.parent.mkdir(parents=True)
            buckets.append(BucketInput(bucket, paths, documents, prefix))
    return buckets


def _moves(
    storage: FineWebStorage, name: str, dump: str, staging: Path, written: dict[str, BucketTokens]
) -> dict[Path, Path | None]:
    """Every bucket's three files onto their published paths. A bucket without documents gets
    no files (Megatron cannot map an empty .bin), and an older output of it is removed."""
    moves: dict[Path, Path | None] = {}
    for bucket in [b.name for b in SEED_POLICY.buckets]:
        targets = token_files(token_prefix(storage.output_root, name, bucket, dump))
        staged = token_files(staging / bucket / dump) if bucket in written else [None] * len(targets)
        moves.update(zip(targets, staged))
    return moves


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
        per_doc = w.tokens / w.documents if w.documents else 0.0
        rate = w.tokens / w.seconds if w.seconds else 0.0
        phases = (w.encoding_seconds, w.ordering_seconds)
        rows.append((bucket, w.documents, w.tokens, per_doc, w.bytes, *phases, round(rate)))
    header = [
        "bucket", "documents", "tokens", "tokens/doc", "bytes", "encoding s", "ordering s", "tokens/s",
    ]
    metadata["buckets"] = dg.MetadataValue.md(table(header, rows))
    return metadata
