"""`tokenized` of one sample dump, run through Dagster or straight through its work, and what it
published."""

from pathlib import Path

import dagster as dg
import numpy as np

from fw_assets.paths import bucketed_files, dedup_path
from fw_assets.resources import Warehouse
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.tokenizing.contract import kept_per_bucket
from fw_assets.tokenizing.encode import ParallelEncoder
from fw_assets.tokenizing.oracle import OracleSample
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.token_progress import TokenProgress
from fw_assets.tokenizing.tokenize_buckets import BucketInput, TokenFormat, tokenize_buckets
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.runs import CHAIN, SAMPLE_DUMPS, materialize_dump
from fw_assets_tests.support.trees import published_tree

DUMP = SAMPLE_DUMPS[0]  # the dump these helpers tokenize


def run_tokenized(source, output, tokenizer: TokenizerResource, chain=False, **kwargs):
    """Materialize `tokenized` for DUMP (after the chain when `chain`) with this tokenizer."""
    assets = [*CHAIN, tokenized] if chain else [tokenized]
    extra = {"tokenizer": tokenizer, **kwargs.pop("extra_resources", {})}
    return materialize_dump(source, output, DUMP, assets=assets, extra_resources=extra, **kwargs)


def tokenized_tree(output: Path, tokenizer: str = "", dump: str = "") -> dict[str, str]:
    """Published token files (of one tokenizer, of one dump, if named): relative path -> sha256."""
    folder = f"tokenized/{tokenizer}/" if tokenizer else "tokenized/"
    return {path: digest for path, digest in published_tree(output).items()
            if path.startswith(folder) and (not dump or Path(path).name.startswith(f"{dump}."))}


def metadata(result: dg.ExecuteInProcessResult) -> dict:
    (materialization,) = result.asset_materializations_for_node("tokenized")
    return {key: value.value for key, value in materialization.metadata.items()}


def bucket_inputs(output: Path, prefix_root: Path) -> list[BucketInput]:
    """DUMP's published buckets with its published dedup decisions, to tokenize straight into
    `prefix_root/<bucket>/DUMP.*`."""
    buckets = []
    decisions = dedup_path(output, DUMP)
    kept = kept_per_bucket(decisions)
    for bucket, files in bucketed_files(output, DUMP, SEED_POLICY).items():
        (prefix_root / bucket).mkdir(parents=True)
        prefix = prefix_root / bucket / DUMP
        buckets.append(BucketInput(bucket, files, kept[bucket], prefix, decisions))
    return buckets


def tokenize_directly(
    buckets: list[BucketInput], scratch: Path, log, workers: int, batch_rows: int, gather_bytes: int
) -> None:
    """`tokenize_buckets` with cl100k, a DuckDB connection of its own and progress on every batch."""
    total = sum(b.documents for b in buckets)
    progress = TokenProgress(log, f"tokenizing {DUMP}", total, interval=0.0)
    spec = TokenizerResource().spec()
    tokenizer = spec.load()
    oracle = OracleSample(tokenizer.oracle(), tokenizer.backend, total)
    with (
        ParallelEncoder(spec, workers) as encoder,
        Warehouse(threads=2, memory_limit="1GiB").connect(scratch.parent / "spill") as con,
    ):
        tokenize_buckets(
            con, buckets, encoder, oracle, TokenFormat(np.dtype(np.int32), tokenizer.eod_id), batch_rows,
            progress, log, DUMP,
            scratch, gather_bytes,
        )
