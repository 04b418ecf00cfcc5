"""`raw`: a dump's FineWeb-Edu source files as downloaded, recorded when they meet the raw contract."""

import dagster as dg

from fw_assets.bucketing import raw_contract
from fw_assets.bucketing.inputs import DumpSource, find_dump_source
from fw_assets.bucketing.raw_contract import RAW_CHECKS, check_raw
from fw_assets.contracts.asset_checks import FORCE_TAG, ContractReport, Events, check_specs, forced, rechecked_nothing
from fw_assets.formats.manifest import as_records
from fw_assets.lib.disk import SpaceNeed
from fw_assets.lib.markdown import table
from fw_assets.lib.progress import Stopwatch
from fw_assets.lib.publish import recover_dump
from fw_assets.lib.sql import load_sql
from fw_assets.lib.versions import DATA_VERSION_TAG, code_version
from fw_assets.partitions import PER_DUMP
from fw_assets.paths import source_dump_dir, spill_dir
from fw_assets.resources import FineWebStorage, Warehouse
from fw_assets.run_health import asset_code_version, writing_step

# The tag Dagster gives a materialization with the code version of the asset that made it.
CODE_VERSION_TAG = "dagster/code_version"

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
    if not problems and (before := _checked_before(context, source)):
        yield rechecked_nothing(source.fingerprint(), {"unchanged_since_run": before}, RAW_CHECKS, _manifest(source))
        return
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
            "score_histogram": dg.MetadataValue.md(
                table(["score from", "rows"], [(s if s is not None else "null", n) for s, n in histogram])
            ),
            **_manifest(source),
        },
        source.fingerprint(),  # what `sampled` records it was made from
    )


def _manifest(source: DumpSource) -> dict:
    """What raw records of the files it checked (read by `sampled`: the same files are not checked
    again in the same run)."""
    return {
        "dagster/row_count": source.rows,
        "files": len(source.files),
        "ignored_files": ", ".join(source.ignored),
        "bytes": dg.MetadataValue.int(source.bytes),
        "folder": dg.MetadataValue.path(str(source.folder)),
        "manifest": dg.MetadataValue.json(as_records(list(source.files))),
    }


def _checked_before(context: dg.AssetExecutionContext, source: DumpSource) -> str | None:
    """The run whose `raw` passed on exactly these files (names, sizes, mtimes: its data version)
    with this code, if the latest did and the run does not force the work: raw has nothing to
    check again."""
    if forced(context):
        return None
    latest = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=[source.dump]), limit=1
    ).records
    tags = (latest[0].asset_materialization.tags or {}) if latest else {}
    if tags.get(DATA_VERSION_TAG) != source.fingerprint() or tags.get(CODE_VERSION_TAG) != asset_code_version(context):
        return None
    context.log.info(f"Dump {source.dump}: its source files are those run {latest[0].run_id} checked with this "
                     f"code; not checked again (tag the run {FORCE_TAG}=true to check them again)")
    return latest[0].run_id
