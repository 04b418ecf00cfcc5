"""The run launcher of deploy/celery/dagster.yaml: each run is one Celery task that a worker
(fw_assets.deploy.celery_worker) takes from its host kind's queue and executes whole.

Dagster's `CeleryRunLauncher` reads a run's health from its task's state, which a killed worker
never updates: the run would stay Started for good. Here a run's worker writes a heartbeat while
it executes the run (fw_assets.deploy.heartbeats), and the health check that Dagster's run
monitoring calls every `poll_interval_seconds` reports a run whose heartbeat stopped as failed;
run retries then launch it again on a live worker. A missing heartbeat alone is not enough: the
run's process is checked where it runs on the daemon's machine, and elsewhere the heartbeat must
stay missing for two beats (`run_worker_verdict`). A run's queue is its partition's kind
(`queues`: a dump's chain, a recipe's mixture) unless the run is tagged `dagster-celery/queue`.
"""

import time
import uuid
from collections.abc import Mapping
from typing import Any

import dagster as dg
from celery.backends.redis import RedisBackend
from dagster._core.launcher import CheckRunHealthResult, LaunchRunContext, WorkerStatus
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import ConfigurableClassData, pack_value
from dagster_celery.config import TASK_EXECUTE_JOB_NAME
from dagster_celery.launcher import CeleryRunLauncher
from dagster_celery.tags import DAGSTER_CELERY_QUEUE_TAG, DAGSTER_CELERY_TASK_ID_TAG
from dagster_celery.tasks import create_execute_job_task

from fw_assets.deploy.heartbeats import WorkerState, last_heartbeat, redis_uptime_seconds, run_worker_verdict
from fw_assets.paths import is_dump_name
from fw_assets.run_health import HOST_TAG, MACHINE_TAG, PID_TAG, PROCESS_START_TAG, run_process_alive

PARTITION_TAG = "dagster/partition"
DEFAULT_QUEUES = {"dump": "dumps", "recipe": "recipes"}
HEALTH = {
    WorkerState.RUNNING: WorkerStatus.RUNNING,
    WorkerState.SUCCEEDED: WorkerStatus.SUCCESS,
    WorkerState.FAILED: WorkerStatus.FAILED,
    WorkerState.LOST: WorkerStatus.FAILED,
}


class MissingHeartbeats:
    """Since when this process has seen each run's heartbeat missing, by its own monotonic clock."""

    def __init__(self):
        self.since: dict[str, float] = {}

    def seen(self, run_id: str, missing: bool) -> tuple[float, bool]:
        """Record one look at the run's heartbeat; how long it has been missing (0 when it is there
        or missing for the first time), and whether this look is the first to miss it."""
        if not missing:
            self.since.pop(run_id, None)
            return 0.0, False
        now = time.monotonic()
        first = run_id not in self.since
        return now - self.since.setdefault(run_id, now), first

    def forget(self, run_id: str) -> None:
        self.since.pop(run_id, None)


def run_queue(tags: Mapping[str, str], queues: Mapping[str, str], default_queue: str) -> str:
    """The Celery queue of a run with `tags`: its `dagster-celery/queue` tag, else the queue of its
    partition's kind (a dump, else a recipe), else (no partition) `default_queue`."""
    if DAGSTER_CELERY_QUEUE_TAG in tags:
        return tags[DAGSTER_CELERY_QUEUE_TAG]
    partition = tags.get(PARTITION_TAG)
    if partition is None:
        return default_queue
    return queues["dump" if is_dump_name(partition) else "recipe"]


class HeartbeatCeleryRunLauncher(CeleryRunLauncher):
    """`CeleryRunLauncher` whose health check tells a lost host by its runs' heartbeats."""

    def __init__(
        self,
        heartbeat_seconds: float,
        lost_after_seconds: float,
        queues: Mapping[str, str] = DEFAULT_QUEUES,
        inst_data: ConfigurableClassData | None = None,
        **celery_config: Any,
    ):
        super().__init__(inst_data=inst_data, **celery_config)
        if not 0 < heartbeat_seconds < lost_after_seconds:
            raise dg.DagsterInvariantViolationError(
                f"run_launcher: heartbeat_seconds ({heartbeat_seconds}) must be above 0 and below "
                f"lost_after_seconds ({lost_after_seconds}): a live worker beats before its key expires"
            )
        self.heartbeat_seconds = heartbeat_seconds
        self.lost_after_seconds = lost_after_seconds
        self.queues = dict(queues)
        self.missing_heartbeats = MissingHeartbeats()

    @classmethod
    def config_type(cls):
        return {
            **CeleryRunLauncher.config_type(),
            "heartbeat_seconds": dg.Field(
                float, default_value=5.0, description="How often a worker writes the heartbeat of the run it executes."
            ),
            "lost_after_seconds": dg.Field(
                float,
                default_value=30.0,
                description="A run without a heartbeat for this long lost its host: run monitoring fails it.",
            ),
            "queues": dg.Field(
                {kind: dg.Field(str, default_value=queue) for kind, queue in DEFAULT_QUEUES.items()},
                is_required=False,
                description="The Celery queue of the runs of each partition kind: one dump, one recipe.",
            ),
        }

    def heartbeat_client(self):
        """The redis-py client of the result backend, where heartbeats are kept."""
        backend = self.celery.backend
        if not isinstance(backend, RedisBackend):
            raise dg.DagsterInvariantViolationError(
                f"run_launcher: the Celery result backend is {type(backend).__name__}; fw_assets keeps "
                "run heartbeats beside the results and needs a redis:// `backend`"
            )
        return backend.client

    def launch_run(self, context: LaunchRunContext) -> None:
        """Send the run to its queue as `CeleryRunLauncher` does, but tag it first: Dagster writes
        a run's tags by reading and rewriting them all, so a tag written after sending (the task's
        id, in `CeleryRunLauncher`) can erase or be erased by the worker's, written as it starts.
        A retried run carries its parent's host tags: they are cleared until a worker names itself."""
        run = context.dagster_run
        queue = run_queue(run.tags, self.queues, self.default_queue)
        task_id = str(uuid.uuid4())
        cleared = dict.fromkeys((HOST_TAG, PID_TAG, PROCESS_START_TAG, MACHINE_TAG), "")
        self._instance.add_run_tags(
            run.run_id, {DAGSTER_CELERY_QUEUE_TAG: queue, DAGSTER_CELERY_TASK_ID_TAG: task_id, **cleared}
        )
        arguments = ExecuteRunArgs(
            job_origin=run.job_code_origin,
            run_id=run.run_id,
            instance_ref=self._instance.get_ref(),
            set_exit_code_on_failure=True,
        )
        task = create_execute_job_task(self.celery).si(execute_job_args_packed=pack_value(arguments))
        task.apply_async(task_id=task_id, queue=queue, routing_key=f"{queue}.{TASK_EXECUTE_JOB_NAME}")
        self._instance.report_engine_event(
            f"Sent to Celery queue {queue} as task {task_id}.", run, cls=self.__class__
        )

    def terminate(self, run_id: str) -> bool:
        """*Terminate* in the UI: mark the run Canceling, which its worker reads at its following beat
        (it then kills the run process and marks the run Canceled), and revoke its Celery task, in
        case no worker has taken it yet."""
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return False
        self._instance.report_run_canceling(run, message="Canceling: its worker stops it at its following beat.")
        return super().terminate(run_id)

    @property
    def supports_resume_run(self) -> bool:
        """No: dagster-celery's resume task refuses the keyword its launcher sends it (TypeError). A run
        whose host was lost is retried instead (run_retries)."""
        return False

    @property
    def confirm_after_seconds(self) -> float:
        """How long a heartbeat must stay missing before a run elsewhere is lost: two beats."""
        return 2 * self.heartbeat_seconds

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        task_id = run.tags.get(DAGSTER_CELERY_TASK_ID_TAG)
        if task_id is None:  # a CLI run: its own host fails it if it dies (fw_assets.run_health)
            return CheckRunHealthResult(WorkerStatus.RUNNING, "Not launched through Celery.")
        client = self.heartbeat_client()
        heartbeat = last_heartbeat(client, run.run_id)
        missing_for, first_miss = self.missing_heartbeats.seen(run.run_id, heartbeat is None)
        verdict = run_worker_verdict(
            self.celery.AsyncResult(task_id).state,
            heartbeat,
            process_alive=run_process_alive(run.tags),
            missing_for=missing_for,
            redis_uptime=redis_uptime_seconds(client),
            lost_after=self.lost_after_seconds,
            confirm_after=self.confirm_after_seconds,
            last_host=run.tags.get(HOST_TAG, ""),
        )
        if verdict.state != WorkerState.RUNNING:
            self.missing_heartbeats.forget(run.run_id)
        elif first_miss:  # said once per absence, on the run's page
            self._instance.report_engine_event(f"Run monitoring: {verdict.message}", run, cls=self.__class__)
        return CheckRunHealthResult(HEALTH[verdict.state], verdict.message)
