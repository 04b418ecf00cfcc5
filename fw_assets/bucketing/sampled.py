"""`sampled`: every row's bucket and keep/drop decision by the sampler of record."""

import time

import dagster as dg

from fw_assets.bucketing import raw_contract, sampled_contract
from fw_assets.bucketing.inputs import DumpSource, read_dump_source
from fw_assets.bucketing.raw import raw
from fw_assets.bucketing.raw_contract import check_raw
from fw_assets.bucketing.sample_and_bucket import STEPS_SQL, selection_counts, write_selection
from fw_assets.bucketing.sampled_contract import SELECTION_CHECKS, check_selection
from fw_assets.contracts.asset_checks import (
    ContractReport,
    Events,
    check_specs,
    guard,
    unchanged_materialization,
    unchanged_output,
)
from fw_assets.formats.manifest import as_records
from fw_assets.lib.disk import SpaceNeed
from fw_assets.lib.markdown import table
from fw_assets.lib.progress import ProgressReporter, Stopwatch
from fw_assets.lib.publish import Staging, data_version, staged_publication
from fw_assets.lib.versions import code_version
from fw_assets.partitions import PER_DUMP
from fw_assets.paths import publication_name, selection_path, spill_dir
from fw_assets.resources import DUCKDB_STEP, FineWebStorage, Warehouse
from fw_assets.run_health import DUCKDB_POOL, asset_code_version, heavy_slot, writing_step
from fw_assets.sampling_policy import SEED_POLICY

# Everything that decides this asset's output, hashed with the policy into its code version.
# It re-checks the raw contract when `raw` did not pass in the same run.
SQL = (*STEPS_SQL, *sampled_contract.CONTRACT_SQL, *raw_contract.CONTRACT_SQL)
MODULES = (
    "fw_assets.bucketing.sample_and_bucket",
    *sampled_contract.CONTRACT_MODULES,
    *raw_contract.CONTRACT_MODULES,
)


SAMPLED_CHECK_SPECS = check_specs("sampled", SELECTION_CHECKS)


@dg.asset(
    **PER_DUMP,
    deps=[raw],
    **DUCKDB_STEP,
    code_version=code_version(sql=SQL, modules=MODULES, policy=SEED_POLICY),
    check_specs=SAMPLED_CHECK_SPECS,
    description="Every row's bucket and keep/drop decision by the sampler of record "
    "(md5 of seed, id and bucket bounds). Compact: no text. Published only when the source "
    "still meets the raw contract and the selection meets its own.",
)
def sampled(
    context: dg.AssetExecutionContext, storage: FineWebStorage, warehouse: Warehouse
) -> Events:
    source = read_dump_source(context.partition_key, storage.source_root)
    root, name = storage.output_root, publication_name("sampled", source.dump)
    started = time.monotonic()
    with writing_step(context, root, _space_needed(source)):
        if unchanged := unchanged_output(context, root, name, source.as_input()):
            yield unchanged_materialization(unchanged, SELECTION_CHECKS, {"rows_kept": unchanged["contents"]["kept"]})
            return
        with (
            heavy_slot(context, root, DUCKDB_POOL),
            staged_publication(root, name, source.dump, context.log.info,
                               code_version=asset_code_version(context)) as staging,
        ):
            report, published, timings, counts, raw_rechecked = yield from _sample(context, source, warehouse, staging)
    yield report.materialization(
        {
            **_selection_metadata(counts, time.monotonic() - started),
            "raw_rechecked": raw_rechecked,
            **timings,
            **warehouse.cores_metadata(),
        },
        data_version(published),
    )


def _sample(context: dg.AssetExecutionContext, source: DumpSource, warehouse: Warehouse, staging: Staging):
    """Write the selection, check it and publish it (a generator: it yields the check results when
    refused); returns (the report, the record, the timings, the counts, whether raw was re-checked)."""
    staged = staging.path / "selection.parquet"
    reporter = ProgressReporter(context.log.info, f"sampling {source.dump}", source.rows)
    with warehouse.connect(spill_dir(staging.output_root)) as con:
        raw_guard = Stopwatch()
        raw_rechecked = not _raw_passed_in_this_run(context, source)
        if raw_rechecked:
            guard(source.dump, "raw", check_raw(con, source.dump, source.files, with_warnings=False))
        raw_guard_seconds = raw_guard.seconds()
        write_selection(con, source.paths, staged, SEED_POLICY, reporter)
        counts = selection_counts(con, staged)
        contract = Stopwatch()
        report = ContractReport(source.dump, "sampled", check_selection(con, staged, SEED_POLICY, source.rows))
        contract_seconds = contract.seconds()
    yield from report.refuse_if_blocked()
    published = staging.publish(
        {selection_path(staging.output_root, source.dump): staged},
        {"rows": source.rows, "kept": sum(kept for _, kept in counts.values())},
        inputs=source.as_input(),
    )
    timings = {"raw_guard_seconds": raw_guard_seconds, "contract_seconds": contract_seconds}
    return report, published, timings, counts, raw_rechecked


def _space_needed(source: DumpSource) -> SpaceNeed:
    return SpaceNeed(source.rows * 64, "about 64 bytes per source row for the selection")


def _raw_passed_in_this_run(context: dg.AssetExecutionContext, source: DumpSource) -> bool:
    """Whether `raw` passed its contract on exactly these files earlier in this run.

    `raw` is recorded only when its blocking checks pass, and its manifest names every file with
    size and mtime. Otherwise (`raw` not in the run, or a file changed since) `sampled` re-checks
    the source before publishing anything derived from it.
    """
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=raw.key, asset_partitions=[source.dump]), limit=1
    ).records
    if not records or records[0].run_id != context.run.run_id:
        return False
    manifest = records[0].asset_materialization.metadata.get("manifest")
    return manifest is not None and manifest.value == as_records(list(source.files))


def _selection_metadata(per_bucket: dict[str | None, tuple[int, int]], seconds: float) -> dict:
    rows_in = sum(rows for rows, _ in per_bucket.values())
    kept = sum(k for _, k in per_bucket.values())
    metadata = {
        "dagster/row_count": kept,
        "rows_in": rows_in,
        "rows_kept": kept,
        "seconds": round(seconds, 2),
        "rows_per_second": round(rows_in / max(seconds, 1e-9)),
        "policy": dg.MetadataValue.json(
            {"seed": SEED_POLICY.seed, "buckets": [[b.low, str(b.high), b.rate] for b in SEED_POLICY.buckets]}
        ),
    }
    rows = []
    for bucket in [None] + [b.name for b in SEED_POLICY.buckets]:
        bucket_in, bucket_kept = per_bucket.get(bucket, (0, 0))
        share = bucket_kept / bucket_in if bucket_in else 0.0
        label = bucket or "below 2.8"
        rows.append((label, bucket_in, bucket_kept, f"{share:.2%}"))
        if bucket:
            metadata[f"rows_in_{bucket}"] = bucket_in
            metadata[f"rows_kept_{bucket}"] = bucket_kept
            metadata[f"kept_share_{bucket}"] = round(share, 4)
    metadata["buckets"] = dg.MetadataValue.md(table(["bucket", "rows in", "kept", "kept share"], rows))
    return metadata
