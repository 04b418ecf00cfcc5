"""`bucketed`: the kept rows of a dump, published as `en/<bucket>/<dump>/` (the seed's layout)."""

import time
from pathlib import Path

import dagster as dg

from fw_assets.bucketing import bucketed_contract
from fw_assets.bucketing.bucketed_contract import BUCKETED_CHECKS, check_bucketed, scanning_sources
from fw_assets.bucketing.inputs import DumpSource, read_dump_source
from fw_assets.bucketing.sample_and_bucket import STEPS_SQL, bucket_stats, write_buckets
from fw_assets.bucketing.sampled import sampled
from fw_assets.contracts.asset_checks import (
    ContractReport,
    Events,
    check_specs,
    unchanged_materialization,
    unchanged_output,
)
from fw_assets.formats.lineage import checked_generation
from fw_assets.lib.disk import SpaceNeed
from fw_assets.lib.markdown import table
from fw_assets.lib.progress import ProgressReporter, Stopwatch
from fw_assets.lib.publish import Staging, data_version, every_file, input_entry, staged_publication, trusted_record
from fw_assets.lib.versions import code_version
from fw_assets.partitions import PER_DUMP
from fw_assets.paths import (
    bucket_dump_dirs,
    publication_name,
    selection_path,
    spill_dir,
)
from fw_assets.resources import DUCKDB_STEP, FineWebStorage, Warehouse
from fw_assets.run_health import DUCKDB_POOL, asset_code_version, heavy_slot, writing_step
from fw_assets.sampling_policy import SEED_POLICY

# Everything that decides this asset's output, hashed with the policy into its code version.
SQL = (*STEPS_SQL, *bucketed_contract.CONTRACT_SQL)
MODULES = ("fw_assets.bucketing.sample_and_bucket", *bucketed_contract.CONTRACT_MODULES)


# The kept rows' id, text and score, zstd, never exceed the source files holding them.
BUCKETED_SPACE = "at most the dump's source size"


BUCKETED_CHECK_SPECS = check_specs("bucketed", BUCKETED_CHECKS)


@dg.asset(
    **PER_DUMP,
    deps=[sampled],
    **DUCKDB_STEP,
    code_version=code_version(sql=SQL, modules=MODULES, policy=SEED_POLICY),
    check_specs=BUCKETED_CHECK_SPECS,
    description="The kept rows (id, text, score; zstd) published as `en/<bucket>/<dump>/`, "
    "only when they meet the bucketed contract.",
)
def bucketed(
    context: dg.AssetExecutionContext, storage: FineWebStorage, warehouse: Warehouse
) -> Events:
    source = read_dump_source(context.partition_key, storage.source_root)
    root, log = storage.output_root, context.log.info
    name, sampled_name = publication_name("bucketed", source.dump), publication_name("sampled", source.dump)
    started = time.monotonic()
    with writing_step(context, root, SpaceNeed(source.bytes, BUCKETED_SPACE)):
        if unchanged := unchanged_output(context, root, name, _inputs(source, trusted_record(root, sampled_name))):
            yield unchanged_materialization(unchanged, BUCKETED_CHECKS)
            return
        with (
            heavy_slot(context, root, DUCKDB_POOL),
            staged_publication(root, name, source.dump, log, code_version=asset_code_version(context)) as staging,
            # every row's decision is joined: the selection is read whole
            checked_generation(root, sampled_name, source.dump, log, every_file) as sampled_record,
        ):
            if sampled_record is None:
                raise dg.Failure(
                    f"Dump {source.dump}: no published selection at {selection_path(root, source.dump)}; "
                    "materialize sampled first. Nothing was published."
                )
            report, published, written, contract_seconds = yield from _bucket(
                context, source, warehouse, staging, sampled_record
            )
    yield report.materialization(
        {
            **_bucketed_metadata(written, time.monotonic() - started),
            "contract_seconds": contract_seconds,
            **warehouse.cores_metadata(),
        },
        data_version(published),
    )


def _inputs(source: DumpSource, sampled_record: dict | None) -> dict:
    """What a publication of the dump's buckets records it was made from."""
    return {publication_name("sampled", source.dump): input_entry(sampled_record), **source.as_input()}


def _bucket(
    context: dg.AssetExecutionContext, source: DumpSource, warehouse: Warehouse, staging: Staging, sampled_record: dict
):
    """Write the kept rows into their buckets, check them and publish them (a generator: it yields
    the check results when refused); returns (the report, the record, the per-bucket figures, the
    contract's seconds)."""
    root = staging.output_root
    selection = selection_path(root, source.dump)
    reporter = ProgressReporter(context.log.info, f"bucketing {source.dump}", source.rows)
    with warehouse.connect(spill_dir(root)) as con:
        folders, source_texts = scanning_sources(
            con, source.paths, source.rows,
            lambda: write_buckets(con, source.paths, selection, staging.path / "out", reporter),
        )
        yield from ContractReport(source.dump, "bucketed", [source_texts]).refuse_if_blocked()
        written = bucket_stats(con, folders)
        contract = Stopwatch()
        staged = {bucket: sorted(folder.glob("*.parquet")) for bucket, folder in folders.items()}
        outcomes = [source_texts, *check_bucketed(con, source.dump, staged, selection, SEED_POLICY)]
        report = ContractReport(source.dump, "bucketed", outcomes)
        contract_seconds = contract.seconds()
    yield from report.refuse_if_blocked()
    targets = bucket_dump_dirs(root, source.dump, SEED_POLICY)
    rows = {bucket: w["rows"] for bucket, w in written.items()}
    published = staging.publish(
        {target: folders.get(bucket) for bucket, target in targets.items()},
        {"buckets": _bucket_contents(root, folders, targets, rows)},
        inputs=_inputs(source, sampled_record),
    )
    return report, published, written, contract_seconds


def _bucket_contents(
    output_root: Path, folders: dict[str, Path], targets: dict[str, Path], rows: dict[str, int]
) -> dict:
    """What the generation record says of each bucket: its rows and published files, also for a
    bucket without rows (so a reader knows it is empty, not missing)."""
    return {
        bucket: {
            "rows": rows.get(bucket, 0),
            "files": [
                str((target / p.name).relative_to(output_root))
                for p in (sorted(folders[bucket].glob("*.parquet")) if bucket in folders else [])
            ],
        }
        for bucket, target in targets.items()
    }


def _bucketed_metadata(written: dict[str, dict], seconds: float) -> dict:
    rows = sum(w["rows"] for w in written.values())
    metadata = {
        "dagster/row_count": rows,
        "bytes_written": dg.MetadataValue.int(sum(w["bytes"] for w in written.values())),
        "seconds": round(seconds, 2),
        "rows_per_second": round(rows / max(seconds, 1e-9)),
    }
    for bucket in [b.name for b in SEED_POLICY.buckets]:
        metadata[f"rows_{bucket}"] = written.get(bucket, {}).get("rows", 0)
    metadata["buckets"] = dg.MetadataValue.md(
        table(
            ["bucket", "rows", "files", "bytes"],
            [(b, w["rows"], w["files"], w["bytes"]) for b, w in sorted(written.items())],
        )
    )
    return metadata
