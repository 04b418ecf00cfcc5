"""`minhash`: each bucketed document's LSH band keys and b-bit signature, one file per dump."""

import time

import dagster as dg

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.dedup.minhash_file import write_minhash_file
from fw_assets.dedup.policy import MINHASH_POLICY
from fw_assets.layout import bucketed_files, minhash_path, sorted_keys_path, spill_dir
from fw_assets.lib.publish import staged_publication
from fw_assets.lib.versions import code_version
from fw_assets.partitions import PER_DUMP
from fw_assets.policy import SEED_POLICY
from fw_assets.resources import DUCKDB_STEP, DuckDBSteps, FineWebStorage

# What decides the file's bytes; the policy's signature fingerprint (n-gram, bands, rows, seed,
# bits, shingling version) leads the code version: changing any of them re-signs every dump.
SQL = ("dedup_sorted_keys",)
MODULES = tuple(
    f"fw_assets.dedup.{name}"
    for name in ("minhash_file", "shingles", "signatures", "sorted_keys", "row_groups", "policy")
)
FINGERPRINT = MINHASH_POLICY.signature_fingerprint()


@dg.asset(
    **PER_DUMP,
    deps=[bucketed],
    **DUCKDB_STEP,
    code_version=code_version(sql=SQL, modules=MODULES, fingerprint=FINGERPRINT),
    description="Each bucketed document's MinHash-LSH band keys and b-bit signature: "
    "`minhash/<dump>.parquet` (id, bucket, score, band_keys, signature) and "
    "`minhash/<dump>.keys.parquet` (the band keys sorted by key, for the dumps decided later).",
)
def minhash(
    context: dg.AssetExecutionContext, storage: FineWebStorage, warehouse: DuckDBSteps
) -> dg.MaterializeResult:
    dump, root = context.partition_key, storage.output_root
    sources = [
        (bucket, path)
        for bucket, paths in bucketed_files(root, dump, SEED_POLICY).items()
        for path in paths
    ]
    if not sources:
        raise dg.Failure(
            f"Dump {dump}: no bucketed parquet for any bucket; materialize bucketed for this dump "
            "first. Nothing was published."
        )
    started = time.monotonic()
    with staged_publication(root, f"minhash-{dump}") as staging:
        staged = staging.path / f"{dump}.parquet"
        with warehouse.connect(spill_dir(root)) as con:
            summary = write_minhash_file(
                con, sources, staged, dump, MINHASH_POLICY, threads=warehouse.thread_count()
            )
        target = minhash_path(root, dump)
        staging.publish({target: staged, sorted_keys_path(target): sorted_keys_path(staged)})
    seconds = time.monotonic() - started
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": summary.documents,
            "documents": summary.documents,
            "without_shingles": summary.without_shingles,
            "bytes_written": dg.MetadataValue.int(
                sum(p.stat().st_size for p in (target, sorted_keys_path(target)))
            ),
            "seconds": round(seconds, 2),
            "documents_per_second": round(summary.documents / max(seconds, 1e-9)),
            "policy": FINGERPRINT,
            "bands_x_rows": f"{MINHASH_POLICY.bands} x {MINHASH_POLICY.rows}",
            **warehouse.cores_metadata(),
        }
    )
