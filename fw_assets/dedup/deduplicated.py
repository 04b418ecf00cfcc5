"""`deduplicated`: one near-duplicate decision per bucketed id of a dump, `dedup/<dump>.parquet`.

A dump is decided against its own minhash file and the minhash files of every earlier dump signed
(fw_assets.dedup.decide): a dump never downloaded has no files and does not block, but one whose
files are there without their generation record, or do not match it, is refused by name. The
decisions record the content version of each earlier dump they were decided against (generation
record and metadata). Decisions never change older dumps', so one run per dump writes only its own
file. When it runs: fw_assets.crawl_order (once the dump and the earlier dumps in flight are signed).
"""

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import duckdb

from fw_assets.contracts.asset_checks import (
    ContractReport,
    Events,
    check_specs,
    unchanged_materialization,
    unchanged_output,
)
from fw_assets.crawl_order import decided_when_signed
from fw_assets.dedup.band_key_index import band_key_index
from fw_assets.dedup.band_key_lineage import (
    DECIDED_AGAINST,
    ReplacedMinhashFiles,
    later_dumps,
    read_by_decisions,
    verified_content_version,
)
from fw_assets.dedup.contract import (
    CONTRACT_SQL,
    DEDUP_CHECKS,
    bucket_drops,
    check_decisions,
    example_pairs,
    similarity_histogram,
)
from fw_assets.dedup.decide import DecisionSummary, decide_dump
from fw_assets.dedup.minhash import minhash
from fw_assets.dedup.minhash_policy import MINHASH_POLICY, Scope
from fw_assets.dedup.signature_files import MinhashFileError
from fw_assets.formats.lineage import checked_generation, content_generation
from fw_assets.lib.disk import SpaceNeed, naming
from fw_assets.lib.markdown import table
from fw_assets.lib.publish import Log, data_version, input_entry, staged_publication, trusted_record
from fw_assets.lib.versions import code_version
from fw_assets.partitions import PER_DUMP_KEPT
from fw_assets.paths import (
    dedup_path,
    generation_record_path,
    minhash_files,
    minhash_path,
    publication_name,
    recorded_bucket_files,
    spill_dir,
)
from fw_assets.resources import DUCKDB_STEP, FineWebStorage, Warehouse
from fw_assets.run_health import DUCKDB_POOL, asset_code_version, heavy_slot, writing_step

SQL = ("dedup_decisions", "dedup_sorted_keys", *CONTRACT_SQL)
MODULES = tuple(
    f"fw_assets.dedup.{name}"
    for name in ("decide", "contract", "sorted_keys", "signature_files", "signing", "row_groups", "minhash_policy")
) + ("fw_assets.dedup.checked_arrow", "fw_assets.lib.compiled")
# The whole policy's fingerprint: scope ($FW_DEDUP_SCOPE) and verification threshold included.
FINGERPRINT = MINHASH_POLICY.fingerprint()
# Every earlier dump's band keys (only the scope across dumps reads them).
EARLIER_BAND_KEYS = (
    [dg.AssetDep(band_key_index, partition_mapping=later_dumps())]
    if MINHASH_POLICY.scope == Scope.ACROSS_DUMPS
    else []
)
# A decision row (id, bucket, pointer, similarity) compresses to well under 100 bytes.
BYTES_PER_DECISION = 100


DEDUPLICATED_CHECK_SPECS = check_specs("deduplicated", DEDUP_CHECKS)


@dg.asset(
    **PER_DUMP_KEPT,
    deps=[minhash, *EARLIER_BAND_KEYS],
    # once the dump and every earlier dump are signed: a new signing of any re-decides it once
    automation_condition=decided_when_signed(own=dg.AssetSelection.assets(minhash),
                                             earlier=dg.AssetSelection.assets(band_key_index)),
    **DUCKDB_STEP,
    code_version=code_version(sql=SQL, modules=MODULES, fingerprint=FINGERPRINT),
    check_specs=DEDUPLICATED_CHECK_SPECS,
    description="One decision per bucketed id: `dedup/<dump>.parquet` (id, bucket, keep, "
    "duplicate_of, duplicate_of_dump, similarity). The earliest crawl wins; within a dump each "
    "near-duplicate cluster keeps its best-scoring document. Scope: $FW_DEDUP_SCOPE.",
)
def deduplicated(
    context: dg.AssetExecutionContext, storage: FineWebStorage, warehouse: Warehouse
) -> Events:
    dump, root, log = context.partition_key, storage.output_root, context.log.info
    name = publication_name("dedup", dump)
    started, cpu_started = time.monotonic(), time.process_time()
    with writing_step(context, root, _space_needed(root, dump)), _published_inputs(root, dump, log) as inputs:
        if unchanged := unchanged_output(context, root, name, inputs.entries):
            yield unchanged_materialization(unchanged, DEDUP_CHECKS, {"documents": unchanged["contents"]["documents"]})
            return
        with (
            heavy_slot(context, root, DUCKDB_POOL),
            staged_publication(root, name, dump, log, code_version=asset_code_version(context)) as staging,
            warehouse.connect(spill_dir(root)) as con,
        ):
            staged = staging.path / f"{dump}.parquet"
            try:
                with naming(staging.path):
                    summary = decide_dump(
                        con, dump, inputs.minhash[dump], list(inputs.earlier().items()), staged, MINHASH_POLICY,
                        threads=warehouse.thread_count(),
                    )
            except MinhashFileError as error:
                raise dg.Failure(f"Dump {dump}: {error}. Nothing was published.") from error
            decide_seconds = time.monotonic() - started
            outcomes = check_decisions(con, dump, staged, inputs.bucketed, inputs.minhash, MINHASH_POLICY)
            report = ContractReport(dump, "deduplicated", outcomes)
            metadata = _metadata(con, dump, staged, inputs, summary)
            yield from report.refuse_if_blocked()
            published = staging.publish(
                {dedup_path(root, dump): staged}, {"documents": summary.documents}, inputs=inputs.entries
            )
    seconds = time.monotonic() - started
    timing = {
        "seconds": round(seconds, 2),
        "decide_seconds": round(decide_seconds, 2),
        # The process's CPU over the step body (DuckDB's and Arrow's threads included), apart
        # from Dagster's own run around it.
        "cpu_seconds": round(time.process_time() - cpu_started, 2),
        "documents_per_second": round(summary.documents / max(seconds, 1e-9)),
    }
    yield report.materialization({**metadata, **timing, **warehouse.cores_metadata()}, data_version(published))


@dataclass(frozen=True)
class DecisionInputs:
    """What one dump's decisions read: the minhash files of the dump and of every earlier dump that
    has one (dump -> path, crawl order), their generations, the content versions of the earlier
    ones, the dump's bucketed files, and all of it as the generation record's inputs (with scope
    across dumps, every earlier dump: one not signed yet as not published, so that signing it later
    makes the decisions stale)."""

    dump: str
    minhash: dict[str, Path]
    generations: dict[str, str]
    earlier_versions: dict[str, str]
    bucketed: list[Path]
    entries: dict[str, dict]

    def earlier(self) -> dict[str, Path]:
        return {d: path for d, path in self.minhash.items() if d < self.dump}


@contextmanager
def _published_inputs(root: Path, dump: str, log: Log) -> Iterator[DecisionInputs]:
    """The inputs as their generation records publish them, each held still while the step reads
    (no publication can replace them meanwhile). An earlier dump never signed (not downloaded) has
    no record and does not block; the dump's own minhash and bucketed must be there."""
    with ExitStack() as held:
        records = {  # another dump's band keys count by content: its chain may be making them again
            d: held.enter_context((checked_generation if d == dump else content_generation)(
                root, publication_name("minhash", d), d, log))
            for d in read_by_decisions(dump, MINHASH_POLICY.scope == Scope.ACROSS_DUMPS)
        }
        bucketed = held.enter_context(checked_generation(root, publication_name("bucketed", dump), dump, log))
        required = {publication_name("minhash", dump): records[dump], publication_name("bucketed", dump): bucketed}
        for name, record in required.items():
            if record is None:
                raise dg.Failure(
                    f"Dump {dump}: {name} was never published (no generation record at "
                    f"{generation_record_path(root, name)}); materialize it first. "
                    "Nothing was published."
                )
        signed = {d: record for d, record in records.items() if record}
        for d in (d for d, record in records.items() if record is None):
            _refuse_unrecorded_files(root, dump, d)
        earlier_versions = {d: _earlier_version(root, dump, d, r) for d, r in signed.items() if d < dump}
        entries = {publication_name("minhash", d): input_entry(r) for d, r in records.items()}
        yield DecisionInputs(
            dump,
            {d: minhash_path(root, d) for d in signed},
            {d: record["generation"] for d, record in signed.items()},
            earlier_versions,
            [p for _, paths in recorded_bucket_files(root, bucketed).values() for p in paths],
            {**entries, publication_name("bucketed", dump): input_entry(bucketed)},
        )


def _refuse_unrecorded_files(root: Path, dump: str, earlier: str) -> None:
    """An earlier dump without a minhash generation record but with minhash files anyway (a deleted
    record, files copied in) is refused: leaving it out would silently drop every match to it."""
    found = [str(p) for p in minhash_files(minhash_path(root, earlier)) if p.exists()]
    if found:
        raise dg.Failure(
            f"Dump {dump}: the earlier dump {earlier} has minhash files ({', '.join(found)}) but no "
            f"generation record ({generation_record_path(root, publication_name('minhash', earlier))}), "
            f"so nothing says they are whole and current. Nothing was published. Materialize minhash "
            f"of {earlier} again (or delete those files if {earlier} must not count), then run it again."
        )


def _earlier_version(root: Path, dump: str, earlier: str, record: dict) -> str:
    """The content version of an earlier dump's minhash files, refused unless it is the one its
    generation record holds."""
    try:
        return verified_content_version(root, earlier, record)
    except MinhashFileError as error:
        raise dg.Failure(f"Dump {dump}: {error}. Nothing was published.") from error
    except ReplacedMinhashFiles as error:
        raise dg.Failure(
            f"Dump {dump}: {error}. Nothing was published. Materialize minhash of {earlier} again, then run it again."
        ) from error


def _space_needed(root: Path, dump: str) -> SpaceNeed:
    record = trusted_record(root, publication_name("minhash", dump))
    documents = record["contents"]["documents"] if record else 0
    return SpaceNeed(documents * BYTES_PER_DECISION, f"under {BYTES_PER_DECISION} bytes per signed document")


def _metadata(
    con: duckdb.DuckDBPyConnection, dump: str, decisions: Path, inputs: DecisionInputs, summary: DecisionSummary
) -> dict:
    buckets = bucket_drops(con, decisions, dump)
    metadata = {
        "dagster/row_count": summary.documents,
        "documents": summary.documents,
        "dropped_within_dump": summary.dropped_within_dump,
        "dropped_against_earlier": summary.dropped_against_earlier,
        "kept": summary.documents - summary.dropped_within_dump - summary.dropped_against_earlier,
        "earlier_dumps_read": len(inputs.earlier()),
        "policy": FINGERPRINT,
        "scope": str(MINHASH_POLICY.scope),
    }
    for bucket, b in buckets.items():
        metadata[f"dropped_within_dump_{bucket}"] = b.dropped_within_dump
        metadata[f"dropped_against_earlier_{bucket}"] = b.dropped_against_earlier
    metadata["buckets"] = dg.MetadataValue.md(
        table(
            ["bucket", "documents", "dropped within dump", "dropped against earlier dumps", "kept"],
            [
                (bucket, b.documents, b.dropped_within_dump, b.dropped_against_earlier,
                 b.documents - b.dropped)
                for bucket, b in buckets.items()
            ],
        )
    )
    metadata["similarity_of_drops"] = dg.MetadataValue.md(similarity_histogram(con, decisions))
    metadata["example_pairs"] = dg.MetadataValue.md(example_pairs(con, dump, decisions, inputs.minhash))
    # The earlier dumps' content versions (band_key_index data versions) the decisions were made from.
    metadata[DECIDED_AGAINST] = dg.MetadataValue.json(inputs.earlier_versions)
    metadata["earlier_dumps"] = dg.MetadataValue.md(
        table(
            ["earlier dump", "content version (band_key_index data version)", "minhash generation"],
            [(d, f"`{v}`", f"`{inputs.generations[d]}`") for d, v in inputs.earlier_versions.items()],
        )
        if inputs.earlier_versions else f"No earlier dump read (scope {MINHASH_POLICY.scope}, or none signed)."
    )
    return metadata
