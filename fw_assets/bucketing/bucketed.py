"""`bucketed`: the kept rows of a dump, published as `en/<bucket>/<dump>/` (the seed's layout)."""

import time

import dagster as dg

from fw_assets.bucketing.checks import BUCKETED_CHECK_SPECS, Events, naming_unreadable_files, report
from fw_assets.bucketing.inputs import read_dump_source
from fw_assets.bucketing.sampled import sampled
from fw_assets.bucketing.steps import STEPS_SQL, bucket_stats, write_buckets
from fw_assets.contracts import bucketed as bucketed_contract
from fw_assets.contracts.bucketed import check_bucketed
from fw_assets.layout import bucket_dump_dirs, selection_path, spill_dir
from fw_assets.lib.markdown import table
from fw_assets.lib.progress import ProgressReporter, Stopwatch
from fw_assets.lib.publish import staged_publication
from fw_assets.lib.versions import code_version
from fw_assets.partitions import PER_DUMP
from fw_assets.policy import SEED_POLICY
from fw_assets.resources import DUCKDB_STEP, DuckDBSteps, FineWebStorage

# Everything that decides this asset's output, hashed with the policy into its code version.
SQL = (*STEPS_SQL, *bucketed_contract.CONTRACT_SQL)
MODULES = ("fw_assets.bucketing.steps", *bucketed_contract.CONTRACT_MODULES)


@dg.asset(
    **PER_DUMP,
    deps=[sampled],
    **DUCKDB_STEP,
    code_version=code_version(sql=SQL, modules=MODULES, policy=SEED_POLICY),
    check_specs=BUCKETED_CHECK_SPECS,
    description="The kept rows (id, text, score; zstd) published as en/<bucket>/<dump>/, "
    "only when they meet the bucketed contract.",
)
def bucketed(
    context: dg.AssetExecutionContext, storage: FineWebStorage, warehouse: DuckDBSteps
) -> Events:
    source = read_dump_source(context.partition_key, storage.source_root)
    selection = selection_path(storage.output_root, source.dump)
    if not selection.is_file():
        raise dg.Failure(
            f"Dump {source.dump}: no selection at {selection}; materialize sampled first. "
            "Nothing was published."
        )
    started = time.monotonic()
    with staged_publication(storage.output_root, f"bucketed-{source.dump}") as staging:
        reporter = ProgressReporter(context.log.info, f"bucketing {source.dump}", source.rows)
        with warehouse.connect(spill_dir(storage.output_root)) as con:
            with naming_unreadable_files(con, source.dump, "bucketed", source.paths):
                folders = write_buckets(con, source.paths, selection, staging.path / "out", reporter)
            written = bucket_stats(con, folders)
            contract = Stopwatch()
            staged = {bucket: sorted(folder.glob("*.parquet")) for bucket, folder in folders.items()}
            outcomes = check_bucketed(con, source.dump, staged, selection, SEED_POLICY)
            contract_seconds = contract.seconds()
        yield from report(source.dump, "bucketed", outcomes)
        targets = bucket_dump_dirs(storage.output_root, source.dump, SEED_POLICY)
        staging.publish({target: folders.get(bucket) for bucket, target in targets.items()})
    yield dg.MaterializeResult(
        metadata={
            **_bucketed_metadata(written, time.monotonic() - started),
            "contract_seconds": contract_seconds,
        }
    )


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
