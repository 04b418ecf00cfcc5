"""`minhash`: each bucketed document's LSH band keys and b-bit signature, one set of files per dump."""

import time
from pathlib import Path

import dagster as dg

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.contracts.asset_checks import unchanged_materialization, unchanged_output
from fw_assets.dedup.minhash_policy import MINHASH_POLICY
from fw_assets.dedup.signature_files import BucketedFileError, content_version, write_minhash_file
from fw_assets.formats.lineage import checked_generation
from fw_assets.lib.disk import SpaceNeed, naming
from fw_assets.lib.publish import Staging, data_version, every_file, input_entry, staged_publication, trusted_record
from fw_assets.lib.versions import code_version
from fw_assets.partitions import PER_DUMP
from fw_assets.paths import (
    generation_record_path,
    minhash_files,
    minhash_path,
    publication_name,
    recorded_bucket_files,
    spill_dir,
)
from fw_assets.resources import DUCKDB_STEP, FineWebStorage, Warehouse
from fw_assets.run_health import DUCKDB_POOL, asset_code_version, heavy_slot, writing_step

# What decides the file's bytes; the policy's signature fingerprint (n-gram, bands, rows, seed,
# bits, shingling version) leads the code version: changing any of them re-signs every dump.
SQL = ("dedup_sorted_keys",)
MODULES = tuple(
    f"fw_assets.dedup.{name}"
    for name in (
        "signature_files", "content_versions", "shingling.fused", "shingling.kernel", "shingling.code_points",
        "shingling.definition", "signing", "sorted_keys", "row_groups", "minhash_policy",
    )
) + ("fw_assets.dedup.checked_arrow", "fw_assets.lib.compiled")
FINGERPRINT = MINHASH_POLICY.signature_fingerprint()
# A signed document takes ~650 bytes: its id, 16 band keys twice (per document and sorted), a
# 224-byte signature and its text's first 80 characters (585 measured on generated texts).
MINHASH_BYTES_PER_DOCUMENT = 650


@dg.asset(
    **PER_DUMP,
    deps=[bucketed],
    **DUCKDB_STEP,
    code_version=code_version(sql=SQL, modules=MODULES, fingerprint=FINGERPRINT),
    description="Each bucketed document's MinHash-LSH band keys and b-bit signature: "
    "`minhash/<dump>.parquet` (id, bucket, score, band_keys, text_start), and for the dumps "
    "decided later `minhash/<dump>.signatures.arrow` (id, signature) and `minhash/<dump>.keys.arrow` "
    "(the band keys sorted by key).",
)
def minhash(
    context: dg.AssetExecutionContext, storage: FineWebStorage, warehouse: Warehouse
) -> dg.MaterializeResult:
    dump, root, log = context.partition_key, storage.output_root, context.log.info
    started = time.monotonic()
    name, bucketed_name = publication_name("minhash", dump), publication_name("bucketed", dump)
    with writing_step(context, root, _space_needed(root, dump)):
        if unchanged := unchanged_output(context, root, name, _inputs(dump, trusted_record(root, bucketed_name))):
            return unchanged_materialization(unchanged, (), {"documents": unchanged["contents"]["documents"]})
        with (
            heavy_slot(context, root, DUCKDB_POOL),
            staged_publication(root, name, dump, log, code_version=asset_code_version(context)) as staging,
            # every text is signed: the bucketed files are read whole
            checked_generation(root, bucketed_name, dump, log, every_file) as bucketed_record,
        ):
            if bucketed_record is None:
                raise dg.Failure(
                    f"Dump {dump}: bucketed was never published for this dump (no generation record at "
                    f"{generation_record_path(root, bucketed_name)}). Materialize `bucketed` for this dump "
                    "first; nothing was published."
                )
            summary, record = _sign(dump, root, warehouse, staging, bucketed_record)
    seconds = time.monotonic() - started
    version = record["contents"]["content_version"]
    return dg.MaterializeResult(
        data_version=dg.DataVersion(data_version(record)),  # the content: an identical re-sign is no change
        metadata={
            "dagster/row_count": summary.documents,
            "documents": summary.documents,
            "without_shingles": summary.without_shingles,
            "bytes_written": dg.MetadataValue.int(
                sum(p.stat().st_size for p in minhash_files(minhash_path(root, dump)))
            ),
            "seconds": round(seconds, 2),
            "documents_per_second": round(summary.documents / max(seconds, 1e-9)),
            "content_version": version,
            "policy": FINGERPRINT,
            "bands_x_rows": f"{MINHASH_POLICY.bands} x {MINHASH_POLICY.rows}",
            **warehouse.cores_metadata(),
        }
    )


def _inputs(dump: str, bucketed_record: dict | None) -> dict:
    """What a publication of the dump's minhash files records it was made from."""
    return {publication_name("bucketed", dump): input_entry(bucketed_record)}


def _sign(dump: str, root: Path, warehouse: Warehouse, staging: Staging, bucketed_record: dict):
    """Sign every bucketed document of the dump and publish the files: (the summary, the record)."""
    sources = [
        (bucket, path)
        for bucket, (_, paths) in recorded_bucket_files(root, bucketed_record).items()
        for path in paths
    ]
    staged = staging.path / f"{dump}.parquet"
    with warehouse.connect(spill_dir(root)) as con, naming(staging.path):
        try:
            summary = write_minhash_file(con, sources, staged, dump, MINHASH_POLICY, threads=warehouse.thread_count())
        except BucketedFileError as error:
            raise dg.Failure(
                f"Dump {dump}: {error}. Nothing was published. Materialize `bucketed` of this dump "
                "again (it is rebuilt from the source), then `minhash`."
            ) from error
    record = staging.publish(
        dict(zip(minhash_files(minhash_path(root, dump)), minhash_files(staged))),
        {"documents": summary.documents, "content_version": content_version(staged)},
        inputs=_inputs(dump, bucketed_record),
    )
    return summary, record


def _space_needed(root: Path, dump: str) -> SpaceNeed:
    record = trusted_record(root, publication_name("bucketed", dump))
    rows = sum(b["rows"] for b in record["contents"]["buckets"].values()) if record else 0
    return SpaceNeed(rows * MINHASH_BYTES_PER_DOCUMENT,
                     f"about {MINHASH_BYTES_PER_DOCUMENT} bytes per bucketed document")
