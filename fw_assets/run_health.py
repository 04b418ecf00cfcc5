"""Runs that die without telling Dagster, and the host's slots for heavy steps.

A run killed with kill -9 (or by the OOM killer) stays STARTED in Dagster's history forever: a CLI
run is not watched by the daemon, and Dagster 1.13's run monitoring cannot check the health of the
default launcher's runs either. Left so, such runs would keep their pool slot claimed and count
against `max_concurrent_runs`. So every step records its host and process in its run's tags, and every
step and every sensor tick fails the STARTED runs of this host whose process is gone. (Runs on
Celery workers are watched by run monitoring through fw_assets.deploy.celery_launcher.)

Heavy steps (DuckDB, the tokenizer) take a slot of this host (fw_assets.lib.slots, a lock the
kernel frees when the process dies) instead of a Dagster pool slot, which only a live process or
the daemon can give back. The number of slots per pool is the instance's pool limit:
`concurrency: pools: default_limit` in dagster.yaml, or `dagster instance concurrency set duckdb 2`.
A host is what settings.host_name() names: the machine, or one of several workers sharing it.

Every publication of a step passes a fence (fw_assets.lib.fence), and so do the start of every
step and every report of an output as unchanged: a run that is no longer the live run of its
partition (run monitoring failed it, or a person terminated it, while its process still ran) starts
and publishes nothing more; its process ends there, as a crash would end it.
"""

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from fw_assets.formats.lineage import RefusedInput
from fw_assets.lib.disk import OutputDiskError, SpaceNeed, explaining_disk_errors
from fw_assets.lib.fence import Guard, guarded_by, pass_fence
from fw_assets.lib.publish import PublishError
from fw_assets.lib.slots import machine_slot
from fw_assets.partitions import dump_partitions
from fw_assets.paths import machine_slots_dir
from fw_assets.resources import AnotherOutputFolder, claim_output_folder
from fw_assets.settings import host_name

# A backfill's runs carry only a partition range: name the dump (or the recipe) on the run's page.
DUMP_TAG = "fw_assets/dump"
RECIPE_TAG = "fw_assets/recipe"
HOST_TAG = "fw_assets/host"
PID_TAG = "fw_assets/pid"
PROCESS_START_TAG = "fw_assets/process_start"
MACHINE_TAG = "fw_assets/machine"

DUCKDB_POOL = "duckdb"
TOKENIZER_POOL = "tokenizer"
MIXTURES_POOL = "mixtures"


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat field 22), None if no
    such process: a pid and its start time name one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name in parentheses may hold spaces
    return None if fields[0] == "Z" else fields[19]


def machine_id() -> str:
    """This machine's boot and pid namespace: processes whose pids can be compared share it (another
    machine, a reboot or another container gives another); empty where /proc does not say."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot} {os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def this_process() -> dict[str, str]:
    """The run tags naming this process: its host (settings.host_name), pid, start time and machine."""
    pid = os.getpid()
    started = process_start(pid) or ""
    return {HOST_TAG: host_name(), PID_TAG: str(pid), PROCESS_START_TAG: started, MACHINE_TAG: machine_id()}


def run_process_alive(tags: dict[str, str]) -> bool | None:
    """Whether the process a run's tags name (`this_process`) still runs, where this process can
    tell: None when the tags name no process, or one of another machine or container."""
    pid, started, machine = (tags.get(key, "") for key in (PID_TAG, PROCESS_START_TAG, MACHINE_TAG))
    if not pid.isdigit() or not machine or machine != machine_id():
        return None
    return process_start(int(pid)) == started


def fail_dead_runs(instance: dg.DagsterInstance, log: Callable[[str], None]) -> list[str]:
    """Mark failed every STARTED run of this host whose process is gone; free its Dagster slots."""
    host = host_name()
    records = instance.get_run_records(
        dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED], tags={HOST_TAG: host})
    )
    failed = []
    for record in records:
        run = record.dagster_run
        pid, started = run.tags.get(PID_TAG, ""), run.tags.get(PROCESS_START_TAG, "")
        if not pid.isdigit() or process_start(int(pid)) == started:
            continue
        message = (
            f"Run {run.run_id} stopped without a word (its process {pid} on {host} is gone: "
            "killed, or out of memory). Marked failed by a later run; its outputs were rolled back "
            "to the previous generation. Re-run the dump."
        )
        instance.report_run_failed(run, message=message)
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        log(message)
        failed.append(run.run_id)
    return failed


def asset_code_version(context: dg.AssetExecutionContext) -> str:
    """The code version of the step's asset: what its publications record they were made by."""
    return context.assets_def.code_versions_by_key[context.asset_key]


def partition_kind(context: dg.AssetExecutionContext) -> str:
    """What the step's partition key names: "dump" for the per-dump chain, else "recipe"."""
    return "dump" if context.assets_def.partitions_def is dump_partitions else "recipe"


def start_step(context: dg.AssetExecutionContext, output_root: Path) -> None:
    """Refuse an output folder other than the instance's (fw_assets.resources.claim_output_folder),
    record the dump (or recipe) and this step's process in its run's tags (shown on the run's
    page), and fail the runs of this host that died."""
    claim_output_folder(context.instance, output_root)
    pass_fence(f"starting {context.asset_key.to_user_string()} of {context.partition_key}")
    tag = DUMP_TAG if partition_kind(context) == "dump" else RECIPE_TAG
    tags = {tag: context.partition_key, **this_process()}
    context.instance.add_run_tags(context.run.run_id, tags)
    fail_dead_runs(context.instance, context.log.warning)


def pool_limit(instance: dg.DagsterInstance, pool: str) -> int:
    """Steps of `pool` one machine runs at once: the instance's limit for it, else its default."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return 1
    limits = {limit.name: limit.limit for limit in storage.get_pool_limits()}
    return limits.get(pool) or storage.get_pool_config().default_pool_limit or 1


def how_to_free(holder: dict) -> str:
    """Who holds a slot, and how an operator frees it without waiting."""
    if not holder:
        return "a run that is just starting"
    return (
        f"run {holder.get('run_id')} ({holder.get('step')} of {holder.get('partition')}, pid "
        f"{holder.get('pid')} on {holder.get('host')}, since {holder.get('since')}); to free it now, "
        f"terminate that run in the UI (Runs → {holder.get('run_id')}) or `kill {holder.get('pid')}`"
    )


def run_is_live(run: dg.DagsterRun | None) -> bool:
    """Whether a run's process may go on: the run has not ended, is not being terminated, and was
    not deleted. A run that is not live is no longer the live run of its partition: its retry,
    or nobody, is."""
    return run is not None and not run.is_finished and run.status != dg.DagsterRunStatus.CANCELING


def publishing_while_live(instance: dg.DagsterInstance, run_id: str) -> Guard:
    """The fence of a step's publications (fw_assets.lib.fence): it lets a publication go on while
    its run is live (`run_is_live`). The process of a run that is not (run monitoring failed it,
    taking its host for lost; a person terminated it) says so in the run's log and ends at once,
    as a crash would end it: nothing of it is published, and it reports nothing that would change
    the run's status."""

    def guard(what: str) -> None:
        run = instance.get_run_by_id(run_id)
        if run_is_live(run):
            return
        status = run.status.value if run is not None else "deleted"
        message = (
            f"Run {run_id} stopped before {what}: the run is {status}, marked so while this "
            f"process (pid {os.getpid()} on {host_name()}) still ran, so it is no longer the live run of "
            "its partition. Its process ends here as a crash would end it: nothing more of this run is "
            "published, and its status stays as it is."
        )
        print(message, file=sys.stderr, flush=True)
        if run is not None:
            instance.report_engine_event(message, run)
        os.kill(os.getpid(), signal.SIGKILL)

    return guard


def pass_step_fence(context: dg.AssetExecutionContext, what: str) -> None:
    """The fence (`publishing_while_live`) for a step outside `writing_step`: returns only while
    its run is live."""
    publishing_while_live(context.instance, context.run.run_id)(what)


@contextmanager
def refusing_stale_inputs() -> Iterator[None]:
    """An input made from inputs replaced since, or whose record or files cannot be trusted
    (fw_assets.formats.lineage), fails the step with what to run, not a traceback."""
    try:
        yield
    except RefusedInput as error:
        raise dg.Failure(description=f"{error} Nothing was published.") from error


@contextmanager
def writing_step(
    context: dg.AssetExecutionContext, output_root: Path, need: SpaceNeed
) -> Iterator[None]:
    """Start the step (see `start_step`); a full or unwritable output disk fails it with a message
    naming the path and the space it needs, a publication that cannot rename into place with why, a
    stale input with what to run, another instance's output folder naming both: not a traceback.
    Its publications pass `publishing_while_live`."""
    step = context.asset_key.to_user_string()
    try:
        partition = f"{partition_kind(context).capitalize()} {context.partition_key}"
        with (
            refusing_stale_inputs(),
            explaining_disk_errors(output_root, partition, step, need),
            guarded_by(publishing_while_live(context.instance, context.run.run_id)),
        ):
            start_step(context, output_root)
            yield
    except (OutputDiskError, PublishError, AnotherOutputFolder) as error:
        raise dg.Failure(description=str(error)) from error


@contextmanager
def heavy_slot(context: dg.AssetExecutionContext, output_root: Path, pool: str) -> Iterator[None]:
    """A slot of `pool` on this host, held while the step works: one heavy step of a kind at a time
    per host, across runs."""
    holder = {
        "run_id": context.run.run_id,
        "step": context.asset_key.to_user_string(),
        "partition": f"{partition_kind(context)} {context.partition_key}",
        "host": host_name(),
    }
    folder = machine_slots_dir(output_root, holder["host"])
    with machine_slot(folder, pool, pool_limit(context.instance, pool), holder, context.log.info, how_to_free):
        yield


@contextmanager
def heavy_step(
    context: dg.AssetExecutionContext, output_root: Path, pool: str, need: SpaceNeed
) -> Iterator[None]:
    """A `writing_step` holding a slot of `pool` on this host while it works."""
    with writing_step(context, output_root, need), heavy_slot(context, output_root, pool):
        yield
