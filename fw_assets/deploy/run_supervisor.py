"""How a worker executes the runs it takes: each in a run process of its own
(fw_assets.deploy.run_process), which the worker sees through from start to end.

While the run process works, the worker beats for the run (fw_assets.deploy.heartbeats) and, at
every beat, reads the run's status. A run that is no longer live while its process runs (run
monitoring failed it, taking its host for lost; a person terminated it) has its process group
killed at once: it publishes nothing more (fw_assets.run_health fences each publication too) and
reports nothing more, so the status it was given stays. A worker asked to stop (SIGTERM or SIGINT:
`local.sh down`, a rolling restart, Kubernetes evicting its pod) kills the run process as a crash
would, so what a half-done step leaves is what a crash leaves (nothing visible), and marks the
run failed as its host's loss would be: run retries launch it again on the next worker. A run
process that dies by itself (the out-of-memory killer) has its run marked failed the same way.
"""

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable

import dagster as dg
from celery.signals import worker_shutting_down

from fw_assets.deploy.heartbeats import RunHeartbeat
from fw_assets.run_health import HOST_TAG, PID_TAG, run_is_live, this_process
from fw_assets.settings import host_name

logger = logging.getLogger(__name__)

RUN_ENDING_EVENTS = {
    dg.DagsterEventType.RUN_SUCCESS, dg.DagsterEventType.RUN_FAILURE, dg.DagsterEventType.RUN_CANCELED
}
WAITING = (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING)


class RunSupervisor:
    """Executes one run at a time in a run process, beating for it (`heartbeat(run_id, holder)`
    returns a started RunHeartbeat) every `beat_seconds`, and sees it through (see the module)."""

    def __init__(
        self, instance: dg.DagsterInstance, heartbeat: Callable[[str, dict], RunHeartbeat], beat_seconds: float
    ):
        self.instance = instance
        self.heartbeat = heartbeat
        self.beat_seconds = beat_seconds
        self.process: subprocess.Popen | None = None
        self.stopped_by: str | None = None  # the signal that stops this worker, once one did

    def connect(self) -> None:
        worker_shutting_down.connect(self.worker_stopping, weak=False)

    def worker_stopping(self, sig: str, **_) -> None:
        """Celery's handler of SIGTERM, SIGINT and SIGQUIT calls this (in the worker's main thread,
        inside the signal handler): end the run process now; `execute` reports the run."""
        self.stopped_by = sig
        if self.process is not None:
            kill_group(self.process)

    def execute(self, run_id: str, command: list[str]) -> int:
        """Execute the run in a process running `command` (its own process group); the process's
        exit status. A run not waiting to start (a second delivery of its task) is left alone."""
        run = self.instance.get_run_by_id(run_id)
        if run is None or run.status not in WAITING:
            status = run.status.value if run else "deleted"
            logger.warning("Run %s is %s: not executed again on this worker.", run_id, status)
            return 0
        tags = this_process()
        self.instance.add_run_tags(run_id, tags)  # before the run starts: its page names this host
        beating = self.heartbeat(run_id, {"host": tags[HOST_TAG], "pid": tags[PID_TAG]})
        try:
            self.process = subprocess.Popen(command, process_group=0)
            if self.stopped_by:  # the signal came before there was a process to end
                kill_group(self.process)
            status = self._watch(run_id)
            self._report_unfinished(run_id, status)
            return status
        finally:
            self.process = None
            beating.stop()  # once the run process is gone and the run's status says so

    def _watch(self, run_id: str) -> int:
        """Wait for the run process, looking at the run's status at every beat; its exit status."""
        process = self.process
        while True:
            try:
                return process.wait(timeout=self.beat_seconds)
            except subprocess.TimeoutExpired:
                pass
            try:
                run = self.instance.get_run_by_id(run_id)
            except Exception as error:  # the database away: the run process cannot report either
                logger.warning("Could not read the status of run %s: %s", run_id, error)
                continue
            if not run_is_live(run) and not self._ended_by(run_id, process.pid):
                self._stop_deposed(run, process)

    def _ended_by(self, run_id: str, pid: int) -> bool:
        """The run's latest ending event came from process `pid`: it is finishing by itself."""
        records = self.instance.get_records_for_run(
            run_id, of_type=RUN_ENDING_EVENTS, ascending=False, limit=1
        ).records
        return bool(records) and records[0].event_log_entry.dagster_event.pid == pid

    def _stop_deposed(self, run: dg.DagsterRun | None, process: subprocess.Popen) -> None:
        kill_group(process)
        status = run.status.value if run else "deleted"
        message = (
            f"Stopped the run's process (pid {process.pid} on {host_name()}) and every "
            f"process of its group: the run is {status}, marked so while they ran, so it is no longer the "
            "live run of its partition. Nothing more of it is published."
        )
        logger.warning("Run %s: %s", run.run_id if run else "", message)
        if run is not None:
            self.instance.report_engine_event(message, run)

    def _report_unfinished(self, run_id: str, exit_status: int) -> None:
        """A run its process left unfinished: failed (retried) or, when it was being terminated, canceled."""
        run = self.instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return
        host = run.tags.get(HOST_TAG, "")
        if run.status == dg.DagsterRunStatus.CANCELING:
            self.instance.report_run_canceled(run, message=f"Terminated: its process on {host} was stopped.")
            return
        if self.stopped_by:
            cause = f"Worker {host} was stopped ({self.stopped_by}) during this run"
        else:
            cause = f"The run's process on {host} ended without ending the run ({ending(exit_status)})"
        self.instance.report_run_failed(
            run,
            message=(
                f"{cause}: its processes were ended as a crash ends them, so nothing it had half done is "
                "visible. Run retries launch the run again on the next worker."
            ),
        )


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the run process's group: the run process and every process it started. Not once the
    process was waited for: its group's id may be another's by then."""
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def ending(exit_status: int) -> str:
    if exit_status < 0:
        name = signal.Signals(-exit_status).name
        return f"killed by {name}" + (": the out-of-memory killer, or a person" if name == "SIGKILL" else "")
    return f"exit status {exit_status}"


def run_process_command(run_id: str) -> list[str]:
    """The command of the run process of `run_id`, child of this process."""
    return [sys.executable, "-m", "fw_assets.deploy.run_process", run_id, str(os.getpid())]
