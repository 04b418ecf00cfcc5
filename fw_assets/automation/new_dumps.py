"""The `new_dumps` sensor: a dump is signed once its files are completely downloaded.

Each tick looks at every dump folder under the source root. A dump whose files are complete (see
fw_assets.formats.dump_files) and whose fingerprint (names, sizes, mtimes) differs from the one last
requested gets one run of `dump_signing` (raw to band_key_index); its decisions and token files
follow by declarative automation once the earlier dumps in flight are signed (fw_assets.crawl_order).
It is hand-written because what it watches, files landing in a folder, is outside Dagster.

The run key holds the fingerprint, so a repeated tick, a daemon restart or a lost cursor never
requests the same files twice, and changed files are requested again. A dump already materialized
from exactly its current files (a UI backfill or the CLI got there first, also while the sensor
waited for that run) is recorded without a run. A dump with a queued or in-progress run (UI, CLI,
sensor, on any host), a failed run about to be retried, or an open backfill still to sign it waits
for them: never a second run beside them. A dump whose source files were deleted since its run was
requested (its folder removed or emptied, as the disk plan allows once its chain is published) is
named in the tick's skip reason and never requested: its published outputs stay. The cursor is this
sensor's own JSON: {"requested": {dump: fingerprint}}.
"""

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import dagster as dg

from fw_assets import settings
from fw_assets.automation.dump_runs import dumps_in_open_backfills, unfinished_runs
from fw_assets.automation.output_folder import refused_folder
from fw_assets.bucketing.raw import raw
from fw_assets.formats.dump_files import DumpFolderState, readiness, scan_dump_folder
from fw_assets.jobs import signing_job
from fw_assets.partitions import dump_folders, dump_partitions
from fw_assets.paths import source_data_dir
from fw_assets.resources import FineWebStorage
from fw_assets.run_health import fail_dead_runs

FINGERPRINT_TAG = "fw_assets/source_fingerprint"
CODE_LOCATION = "fw_assets"
REASONS_SHOWN = 10


def run_key(dump: str, fingerprint: str) -> str:
    return f"{dump}@{fingerprint}"


def load_cursor(cursor: str | None) -> dict[str, str]:
    """Dump -> fingerprint last requested (or found already materialized)."""
    return json.loads(cursor)["requested"] if cursor else {}


def dump_cursor(requested: dict[str, str]) -> str:
    return json.dumps({"requested": dict(sorted(requested.items()))})


@dg.sensor(
    name="new_dumps",
    job=signing_job,
    minimum_interval_seconds=settings.sensor_interval_seconds(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Signs each dump folder whose files are completely downloaded and "
        "differ from the files it last requested. Interval: $FW_SENSOR_INTERVAL_SECONDS (300); "
        "files not named train-XXXXX-of-NNNNN must be unchanged for $FW_SENSOR_SETTLE_SECONDS (600)."
    ),
)
def new_dumps(context: dg.SensorEvaluationContext, storage: FineWebStorage) -> dg.SensorResult:
    if refused := refused_folder(context, storage):
        return dg.SensorResult(skip_reason=refused, cursor=context.cursor)
    # dead runs of this host would otherwise fill max_concurrent_runs and hold the queue
    fail_dead_runs(context.instance, context.log.warning)
    requested = load_cursor(context.cursor)
    folders = dump_folders(storage.source_root)
    if not folders:
        nothing = f"No dump folders (CC-MAIN-YYYY-WW) under {source_data_dir(storage.source_root)}"
        skip_reason = _sentences([nothing, _deleted_note(sorted(requested))])
        return dg.SensorResult(skip_reason=skip_reason, cursor=context.cursor)
    settle = settings.sensor_settle_seconds()
    is_processed = _processed_checker(context)
    busy = _busy_reasons(context)
    decisions = {
        dump: _decide(dump, folder, requested.get(dump), settle, is_processed, busy.get(dump))
        for dump, folder in folders.items()
    }
    requests = []
    for dump, decision in decisions.items():
        if decision.action not in ("unchanged", "deleted"):
            context.log.info(f"{dump}: {decision.reason}")
        if decision.action in ("request", "adopt"):
            requested[dump] = decision.state.fingerprint
        if decision.action == "request":
            requests.append(_run_request(decision.state))
    if requests:
        return dg.SensorResult(run_requests=requests, cursor=dump_cursor(requested))
    deleted = sorted(
        [d for d in requested if d not in folders] + [d for d, x in decisions.items() if x.action == "deleted"]
    )
    return dg.SensorResult(skip_reason=_skip_reason(decisions, deleted), cursor=dump_cursor(requested))


@dataclass(frozen=True)
class Decision:
    action: str  # "request" a run, "adopt" files processed without the sensor, "unchanged", "deleted" or "wait"
    reason: str
    state: DumpFolderState | None = None


def _decide(
    dump: str,
    folder: Path,
    last_requested: str | None,
    settle_seconds: int,
    is_processed: Callable[[DumpFolderState], bool],
    busy: str | None,
) -> Decision:
    """What to do about one dump folder this tick (`busy`: why a run or backfill of the dump is
    under way or about to be, if one is)."""
    if dump not in dump_partitions.get_partition_keys():
        return Decision(
            "wait",
            f"not a partition of the loaded code location; reload the code location "
            f"'{CODE_LOCATION}' (UI: Deployment > Reload, or restart Dagster) to process it",
        )
    try:
        state = scan_dump_folder(dump, folder)
        if last_requested is not None and not state.files and not state.in_progress:
            return Decision("deleted", "its source files were deleted since its run was requested", state)
        if state.fingerprint == last_requested:
            return Decision("unchanged", "files unchanged since requested", state)
        ready = readiness(state, time.time_ns(), settle_seconds)
    except FileNotFoundError as error:  # a download tool renamed or removed a file meanwhile
        return Decision("wait", f"files changed while being looked at ({error.filename}); next tick")
    if not ready.ready:
        return Decision("wait", ready.reason, state)
    if busy:  # never beside the dump's own run: after it, these files may be processed
        return Decision("wait", busy, state)
    if is_processed(state):  # a UI backfill or a CLI run got there first (the sensor may have waited for it)
        return Decision("adopt", "already materialized from these files; not requested again", state)
    return Decision("request", f"{ready.reason}; requesting a run (files {state.fingerprint})", state)


def _busy_reasons(context: dg.SensorEvaluationContext) -> dict[str, str]:
    """Dump -> why it waits: its run queued, in progress or about to be retried, or an open backfill
    still to sign it."""
    reasons = {
        dump: f"backfill {backfill_id} is still to sign this dump; next tick after it"
        for dump, backfill_id in dumps_in_open_backfills(
            context.instance, context.repository_def.asset_graph, raw.key, signing_job.name
        ).items()
    }
    for dump, run in unfinished_runs(context.instance).items():
        reasons[dump] = (
            f"run {run.run_id} of this dump failed and is about to be retried; next tick after its retry"
            if run.is_complete_and_waiting_to_retry
            else f"run {run.run_id} of this dump is queued or in progress; next tick after it"
        )
    return reasons


def _run_request(state: DumpFolderState) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=run_key(state.dump, state.fingerprint),
        partition_key=state.dump,
        tags={FINGERPRINT_TAG: state.fingerprint},
    )


def _processed_checker(context: dg.SensorEvaluationContext) -> Callable[[DumpFolderState], bool]:
    """A test of whether a dump was processed (UI backfill, CLI) from exactly its current files.

    True when every asset of the chain has a materialization of the dump and the latest `raw`
    manifest lists the same file names, sizes and mtimes. Instance queries run once per tick.
    """
    instance = context.instance

    @cache
    def materialized_everywhere() -> set[str]:
        keys = signing_job.selection.resolve(context.repository_def.asset_graph)
        return set.intersection(*(set(instance.get_materialized_partitions(key)) for key in keys))

    def is_processed(state: DumpFolderState) -> bool:
        if state.dump not in materialized_everywhere():
            return False
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=raw.key, asset_partitions=[state.dump]), limit=1
        ).records
        manifest = records[0].asset_materialization.metadata.get("manifest") if records else None
        return manifest is not None and _same_files(manifest.value, state)

    return is_processed


def _same_files(manifest: list[dict], state: DumpFolderState) -> bool:
    recorded = sorted((Path(entry["path"]).name, entry["bytes"], entry["mtime"]) for entry in manifest)
    current = [(f.name, f.bytes, f.mtime_ns) for f in state.files]
    return len(recorded) == len(current) and all(
        # the manifest holds float seconds; a microsecond absorbs their rounding
        r_name == name and r_bytes == size and abs(r_mtime * 1e9 - mtime_ns) < 1_000
        for (r_name, r_bytes, r_mtime), (name, size, mtime_ns) in zip(recorded, current)
    )


def _deleted_note(dumps: list[str]) -> str:
    """What the skip reason says of dumps whose source files were deleted since their run was
    requested ("" for none)."""
    if not dumps:
        return ""
    more = len(dumps) - REASONS_SHOWN
    shown = ", ".join(dumps[:REASONS_SHOWN]) + (f", and {more} more" if more > 0 else "")
    return (f"{len(dumps)} dump(s) with their source files deleted since their run was requested ({shown}): "
            "their published outputs stay and nothing is requested for them (put the files back to process "
            "one again)")


def _sentences(parts: list[str]) -> str:
    return ". ".join(part for part in parts if part) + "."


def _skip_reason(decisions: dict[str, Decision], deleted: list[str]) -> str:
    waiting = [f"{dump}: {d.reason}" for dump, d in decisions.items() if d.action == "wait"]
    settled = sum(d.action in ("unchanged", "adopt") for d in decisions.values())
    parts = []
    if waiting:
        more = len(waiting) - REASONS_SHOWN
        shown = "; ".join(waiting[:REASONS_SHOWN]) + (f"; and {more} more dumps" if more > 0 else "")
        parts.append(f"Waiting for {shown}")
    if settled:
        parts.append(f"{settled} dump(s) unchanged since their files were last requested or materialized")
    return _sentences([*parts, _deleted_note(deleted)])
