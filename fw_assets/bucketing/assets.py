"""raw -> sampled -> bucketed, one partition per dump, each run holding the whole chain."""

import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from fw_assets.bucketing.checks import (
    BUCKETED_CHECK_SPECS,
    RAW_CHECK_SPECS,
    SAMPLED_CHECK_SPECS,
    guard,
    naming_unreadable_files,
    report,
)
from fw_assets.bucketing.inputs import DumpSource, find_dump_source, read_dump_source
from fw_assets.bucketing.layout import (
    bucket_contents,
    bucket_dump_dirs,
    bucketed_publication,
    sampled_publication,
    selection_path,
)
from fw_assets.lib.manifest import as_records
from fw_assets.lib.markdown import table
from fw_assets.bucketing.steps import bucket_stats, selection_counts, write_buckets, write_selection
from fw_assets.contracts.bucketed import check_bucketed
from fw_assets.contracts.raw import check_raw
from fw_assets.contracts.selection import check_selection
from fw_assets.lib.progress import ProgressReporter
from fw_assets.lib.publish import published_generation, recover_dump, staged_publication
from fw_assets.lib.sql import load_sql, sql_fingerprint
from fw_assets.partitions import dump_partitions
from fw_assets.policy import SEED_POLICY
from fw_assets.resources import DuckDBResource, FineWebStorage
from fw_assets.run_health import DUCKDB_POOL, heavy_step, start_step

POLICY = SEED_POLICY

Events = Iterator[dg.AssetCheckResult | dg.MaterializeResult]

# The contract statements each asset runs are part of its code version.
RAW_CONTRACT_SQL = (
    "contract_raw_rows",
    "contract_duplicate_ids",
    "contract_null_counts",
    "contract_text_nulls",
)
BUCKETED_CONTRACT_SQL = (
    "contract_selection",
    "contract_bucketed_rows",
    "contract_bucketed_membership",
    "contract_duplicate_ids",
    "contract_null_counts",
    "contract_text_nulls",
)

PER_DUMP = dict(
    partitions_def=dump_partitions,
    backfill_policy=dg.BackfillPolicy.multi_run(1),
    group_name="fineweb_edu",
)


def _source(context: dg.AssetExecutionContext, storage: FineWebStorage) -> DumpSource:
    dump = context.partition_key
    return read_dump_source(dump, storage.dump_dir(dump))


def _spill_dir(storage: FineWebStorage) -> Path:
    return storage.output_root / ".staging" / "duckdb-spill"


class Stopwatch:
    """Seconds since it was made, rounded for metadata."""

    def __init__(self) -> None:
        self._started = time.monotonic()

    def seconds(self) -> float:
        return round(time.monotonic() - self._started, 2)


@dg.asset(
    **PER_DUMP,
    code_version=sql_fingerprint("score_histogram", *RAW_CONTRACT_SQL),
    kinds={"parquet"},
    check_specs=RAW_CHECK_SPECS,
    description="The dump's FineWeb-Edu source files as downloaded (nothing is copied): "
    "a manifest of files, rows, bytes and schema, and a score histogram; recorded only when "
    "the files pass the raw contract.",
)
def raw(context: dg.AssetExecutionContext, storage: FineWebStorage, duckdb: DuckDBResource) -> Events:
    dump = context.partition_key
    start_step(context)
    recover_dump(storage.output_root, dump, context.log.info)
    source, problems = find_dump_source(dump, storage.dump_dir(dump))
    with duckdb.connect(_spill_dir(storage)) as con:
        contract = Stopwatch()
        outcomes = check_raw(con, dump, source.files, problems)
        contract_seconds = contract.seconds()
        yield from report(dump, "raw", outcomes)
        histogram = con.execute(load_sql("score_histogram"), {"files": source.paths}).fetchall()
    yield dg.MaterializeResult(
        metadata={
            "contract_seconds": contract_seconds,
            "dagster/row_count": source.rows,
            "files": len(source.files),
            "bytes": dg.MetadataValue.int(source.bytes),
            "folder": dg.MetadataValue.path(str(source.folder)),
            "score_histogram": dg.MetadataValue.md(
                table(["score from", "rows"], [(s if s is not None else "null", n) for s, n in histogram])
            ),
            "manifest": dg.MetadataValue.json(as_records(list(source.files))),
        }
    )


@dg.asset(
    **PER_DUMP,
    deps=[raw],
    code_version=f"{POLICY.fingerprint()}-"
    f"{sql_fingerprint('select_sample', 'selection_counts', 'contract_selection', *RAW_CONTRACT_SQL)}",
    kinds={"duckdb", "parquet"},
    check_specs=SAMPLED_CHECK_SPECS,
    description="Every row's bucket and keep/drop decision by the sampler of record "
    "(md5 of seed, id and bucket bounds). Compact: no text. Published only when the source "
    "still meets the raw contract and the selection meets its own.",
)
def sampled(
    context: dg.AssetExecutionContext, storage: FineWebStorage, duckdb: DuckDBResource
) -> Events:
    source = _source(context, storage)
    started = time.monotonic()
    with (
        heavy_step(context, storage.output_root, DUCKDB_POOL),
        staged_publication(
            storage.output_root, sampled_publication(source.dump), source.dump, context.log.info
        ) as staging,
    ):
        staged = staging.path / "selection.parquet"
        reporter = ProgressReporter(context.log.info, f"sampling {source.dump}", source.rows)
        with duckdb.connect(_spill_dir(storage)) as con:
            raw_guard = Stopwatch()
            raw_rechecked = not _raw_passed_in_this_run(context, source)
            if raw_rechecked:
                guard(source.dump, "raw", check_raw(con, source.dump, source.files, with_warnings=False))
            raw_guard_seconds = raw_guard.seconds()
            write_selection(con, source.paths, staged, POLICY, reporter)
            counts = selection_counts(con, staged)
            contract = Stopwatch()
            outcomes = check_selection(con, staged, POLICY, source.rows)
            contract_seconds = contract.seconds()
        yield from report(source.dump, "sampled", outcomes)
        staging.publish(
            {selection_path(storage.output_root, source.dump): staged},
            {"rows": source.rows, "kept": sum(kept for _, kept in counts.values())},
        )
    yield dg.MaterializeResult(
        metadata={
            **_selection_metadata(counts, time.monotonic() - started),
            "raw_rechecked": raw_rechecked,
            "raw_guard_seconds": raw_guard_seconds,
            "contract_seconds": contract_seconds,
        }
    )


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
            {"seed": POLICY.seed, "buckets": [[b.low, str(b.high), b.rate] for b in POLICY.buckets]}
        ),
    }
    rows = []
    for bucket in [None] + [b.name for b in POLICY.buckets]:
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


@dg.asset(
    **PER_DUMP,
    deps=[sampled],
    code_version=f"{POLICY.fingerprint()}-"
    f"{sql_fingerprint('write_buckets', 'bucket_counts', *BUCKETED_CONTRACT_SQL)}",
    kinds={"duckdb", "parquet"},
    check_specs=BUCKETED_CHECK_SPECS,
    description="The kept rows (id, text, score; zstd) published as en/<bucket>/<dump>/, "
    "only when they meet the bucketed contract.",
)
def bucketed(
    context: dg.AssetExecutionContext, storage: FineWebStorage, duckdb: DuckDBResource
) -> Events:
    source = _source(context, storage)
    root, log = storage.output_root, context.log.info
    selection = selection_path(root, source.dump)
    started = time.monotonic()
    with (
        heavy_step(context, root, DUCKDB_POOL),
        staged_publication(root, bucketed_publication(source.dump), source.dump, log) as staging,
        published_generation(root, sampled_publication(source.dump), source.dump, log) as sampled_record,
    ):
        if sampled_record is None:
            raise dg.Failure(
                f"Dump {source.dump}: no published selection at {selection}; materialize sampled "
                "first. Nothing was published."
            )
        reporter = ProgressReporter(context.log.info, f"bucketing {source.dump}", source.rows)
        with duckdb.connect(_spill_dir(storage)) as con:
            with naming_unreadable_files(con, source.dump, "bucketed", source.paths):
                folders = write_buckets(con, source.paths, selection, staging.path / "out", reporter)
            written = bucket_stats(con, folders)
            contract = Stopwatch()
            staged = {bucket: sorted(folder.glob("*.parquet")) for bucket, folder in folders.items()}
            outcomes = check_bucketed(con, source.dump, staged, selection, POLICY)
            contract_seconds = contract.seconds()
        yield from report(source.dump, "bucketed", outcomes)
        targets = bucket_dump_dirs(root, source.dump, POLICY)
        rows = {bucket: w["rows"] for bucket, w in written.items()}
        staging.publish(
            {target: folders.get(bucket) for bucket, target in targets.items()},
            {
                "buckets": bucket_contents(root, folders, targets, rows),
                "sampled_generation": sampled_record["generation"],
            },
        )
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
    for bucket in [b.name for b in POLICY.buckets]:
        metadata[f"rows_{bucket}"] = written.get(bucket, {}).get("rows", 0)
    metadata["buckets"] = dg.MetadataValue.md(
        table(
            ["bucket", "rows", "files", "bytes"],
            [(b, w["rows"], w["files"], w["bytes"]) for b, w in sorted(written.items())],
        )
    )
    return metadata
