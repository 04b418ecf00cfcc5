"""The `new_dumps` sensor: a dump is processed once its files are completely downloaded.

Each tick looks at every dump folder under the source root. A dump whose files are complete (see
fw_assets.lib.dump_files) and whose fingerprint (names, sizes, mtimes) differs from the one last
requested gets one run of the whole chain. The run key holds the fingerprint, so a repeated tick, a
daemon restart or a lost cursor never requests the same files twice, and changed files are requested
again. The cursor is this sensor's own JSON: {"requested": {dump: fingerprint}}.
"""

import json
import os
import time
from functools import cache
from pathlib import Path

import dagster as dg

from fw_assets.bucketing.assets import raw
from fw_assets.jobs import dump_chain_job
from fw_assets.lib.dump_files import DumpFolderState, readiness, scan_dump_folder
from fw_assets.partitions import dump_folders, dump_partitions
from fw_assets.resources import FineWebStorage

INTERVAL_ENV = "FW_SENSOR_INTERVAL_SECONDS"
SETTLE_ENV = "FW_SENSOR_SETTLE_SECONDS"
DEFAULT_INTERVAL_SECONDS = 300
DEFAULT_SETTLE_SECONDS = 600
FINGERPRINT_TAG = "fw_assets/source_fingerprint"
CODE_LOCATION = "fw_assets"
REASONS_SHOWN = 10


def env_seconds(name: str, default: int, minimum: int) -> int:
    """An integer number of seconds from the environment, with a clear error when it is not one."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < minimum:
        raise ValueError(f"{name}={value!r}: expected a whole number of seconds >= {minimum}")
    return int(value)


def run_key(dump: str, fingerprint: str) -> str:
    return f"{dump}@{fingerprint}"


def load_cursor(cursor: str | None) -> dict[str, str]:
    """Dump -> fingerprint last requested (or found already materialized)."""
    return json.loads(cursor)["requested"] if cursor else {}


def dump_cursor(requested: dict[str, str]) -> str:
    return json.dumps({"requested": dict(sorted(requested.items()))})


@dg.sensor(
    name="new_dumps",
    job=dump_chain_job,
    minimum_interval_seconds=env_seconds(INTERVAL_ENV, DEFAULT_INTERVAL_SECONDS, minimum=1),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Runs the whole chain for each dump folder whose files are completely downloaded and "
        "differ from the files it last requested. Interval: $FW_SENSOR_INTERVAL_SECONDS (300); "
        "files not named train-XXXXX-of-NNNNN must be unchanged for $FW_SENSOR_SETTLE_SECONDS (600)."
    ),
)
def new_dumps(context: dg.SensorEvaluationContext, storage: FineWebStorage) -> dg.SensorResult:
    requested = load_cursor(context.cursor)
    folders = dump_folders(storage.source_root)
    if not folders:
        return dg.SensorResult(
            skip_reason=f"No dump folders (CC-MAIN-YYYY-WW) under {storage.source_root / 'data'}.",
            cursor=context.cursor,
        )
    loaded = set(dump_partitions.get_partition_keys())
    settle = env_seconds(SETTLE_ENV, DEFAULT_SETTLE_SECONDS, minimum=0)
    is_processed = _processed_checker(context)
    requests, waiting, unchanged = [], {}, 0
    for dump, folder in folders.items():
        if dump not in loaded:
            waiting[dump] = (
                f"not a partition of the loaded code location; reload the code location "
                f"'{CODE_LOCATION}' (UI: Deployment > Reload, or restart Dagster) to process it"
            )
            continue
        try:
            state = scan_dump_folder(dump, folder)
            if state.fingerprint == requested.get(dump):
                unchanged += 1
                continue
            ready = readiness(state, time.time_ns(), settle)
        except FileNotFoundError as error:  # a download tool renamed or removed a file meanwhile
            waiting[dump] = f"files changed while being looked at ({error.filename}); next tick"
            continue
        if not ready.ready:
            waiting[dump] = ready.reason
        elif dump not in requested and is_processed(state):
            context.log.info(f"{dump}: already materialized from these files; not requested again")
            requested[dump] = state.fingerprint
            unchanged += 1
        else:
            context.log.info(f"{dump}: {ready.reason}; requesting a run (files {state.fingerprint})")
            requests.append(_run_request(state))
            requested[dump] = state.fingerprint
    for dump, reason in waiting.items():
        context.log.info(f"{dump}: {reason}")
    if requests:
        return dg.SensorResult(run_requests=requests, cursor=dump_cursor(requested))
    return dg.SensorResult(skip_reason=_skip_reason(waiting, unchanged), cursor=dump_cursor(requested))


def _run_request(state: DumpFolderState) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=run_key(state.dump, state.fingerprint),
        partition_key=state.dump,
        tags={FINGERPRINT_TAG: state.fingerprint},
    )


def _processed_checker(context: dg.SensorEvaluationContext):
    """A test of whether a dump was processed (UI backfill, CLI) from exactly its current files.

    True when every asset of the chain has a materialization of the dump and the latest `raw`
    manifest lists the same file names, sizes and mtimes. Instance queries run once per tick.
    """
    instance = context.instance

    @cache
    def materialized_everywhere() -> set[str]:
        keys = dump_chain_job.selection.resolve(context.repository_def.asset_graph)
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


def _skip_reason(waiting: dict[str, str], unchanged: int) -> str:
    parts = []
    if waiting:
        shown = [f"{dump}: {reason}" for dump, reason in list(waiting.items())[:REASONS_SHOWN]]
        more = len(waiting) - REASONS_SHOWN
        parts.append("Waiting for " + "; ".join(shown) + (f"; and {more} more dumps" if more > 0 else ""))
    if unchanged:
        parts.append(f"{unchanged} dump(s) unchanged since their files were last requested or materialized")
    return ". ".join(parts) + "."
