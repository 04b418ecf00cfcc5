"""`raw`: a dump's FineWeb-Edu source files as downloaded, recorded when they meet the raw contract."""

import dagster as dg

from fw_assets.bucketing import raw_contract
from fw_assets.bucketing.inputs import find_dump_source
from fw_assets.bucketing.raw_contract import RAW_CHECKS, check_raw
from fw_assets.contracts.asset_checks import ContractReport, Events, check_specs
from fw_assets.formats.manifest import as_records
from fw_assets.lib.disk import SpaceNeed
from fw_assets.lib.markdown import table
from fw_assets.lib.progress import Stopwatch
from fw_assets.lib.publish import recover_dump
from fw_assets.lib.sql import load_sql
from fw_assets.lib.versions import code_version
from fw_assets.partitions import PER_DUMP
from fw_assets.paths import source_dump_dir, spill_dir
from fw_assets.resources import FineWebStorage, Warehouse
from fw_assets.run_health import writing_step

# Everything that decides this asset's record, hashed into its code version.
SQL = ("score_histogram", *raw_contract.CONTRACT_SQL)
MODULES = ("fw_assets.bucketing.inputs", "fw_assets.formats.manifest", *raw_contract.CONTRACT_MODULES)


# raw publishes nothing; it writes only DuckDB's spill files, when its memory runs short.
SPILL_ONLY = SpaceNeed(0, "raw writes only DuckDB's spill files, when memory runs short")


RAW_CHECK_SPECS = check_specs("raw", RAW_CHECKS)


@dg.asset(
    **PER_DUMP,
    code_version=code_version(sql=SQL, modules=MODULES),
    kinds={"parquet"},
    check_specs=RAW_CHECK_SPECS,
    description="The dump's FineWeb-Edu source files as downloaded (nothing is copied): "
    "a manifest of files, rows, bytes and schema, and a score histogram; recorded only when "
    "the files pass the raw contract.",
)
def raw(context: dg.AssetExecutionContext, storage: FineWebStorage, warehouse: Warehouse) -> Events:
    dump = context.partition_key
    with writing_step(context, storage.output_root, SPILL_ONLY):
        recover_dump(storage.output_root, dump, context.log.info)
        yield from _check_source(context, storage, warehouse, dump)


def _check_source(
    context: dg.AssetExecutionContext, storage: FineWebStorage, warehouse: Warehouse, dump: str
) -> Events:
    source, problems = find_dump_source(dump, source_dump_dir(storage.source_root, dump))
    if source.ignored:
        context.log.warning(
            f"Dump {dump}: ignored {len(source.ignored)} macOS AppleDouble file(s) in {source.folder} "
            f"({', '.join(source.ignored[:3])}{', …' if len(source.ignored) > 3 else ''}): metadata "
            "macOS writes beside files copied to a foreign disk, not data. Delete them at will."
        )
    with warehouse.connect(spill_dir(storage.output_root)) as con:
        contract = Stopwatch()
        report = ContractReport(dump, "raw", check_raw(con, dump, source.files, problems))
        contract_seconds = contract.seconds()
        yield from report.refuse_if_blocked()
        histogram = con.execute(load_sql("score_histogram"), {"files": source.paths}).fetchall()
    yield report.materialization(
        {
            "contract_seconds": contract_seconds,
            **warehouse.cores_metadata(),
            "dagster/row_count": source.rows,
            "files": len(source.files),
            "ignored_files": ", ".join(source.ignored),
            "bytes": dg.MetadataValue.int(source.bytes),
            "folder": dg.MetadataValue.path(str(source.folder)),
            "score_histogram": dg.MetadataValue.md(
                table(["score from", "rows"], [(s if s is not None else "null", n) for s, n in histogram])
            ),
            "manifest": dg.MetadataValue.json(as_records(list(source.files))),
        },
        source.fingerprint(),  # what `sampled` records it was made from
    )
