"""Heartbeats of the runs a worker executes, kept in Redis with a time to live: a run whose host was
lost (its worker killed, the machine powered off or cut off) is told from a run that is only busy.

While a worker executes a run, a thread of its process writes the run's key every `every` seconds,
each time with a time to live of `lost_after` seconds. Whatever stops the beating, the key is gone
`lost_after` seconds after the last beat. Redis expires keys by its own clock: the hosts' clocks
never enter. A key can also vanish without its worker stopping: Redis restarted without its data,
the key deleted by hand, a worker cut off from Redis but not from its run. So a missing key is
weighed before a run is called lost (`run_worker_verdict`): where the run's process is on the
daemon's own machine, that process is checked instead; elsewhere the key must stay missing for
`confirm_after` seconds (a live worker writes it again meanwhile), and Redis must have been up for
`lost_after` seconds.
"""

import json
import logging
import threading
from dataclasses import dataclass
from enum import Enum

KEY_PREFIX = "fw_assets:run-heartbeat:"

logger = logging.getLogger(__name__)


def heartbeat_key(run_id: str) -> str:
    return KEY_PREFIX + run_id


class RunHeartbeat:
    """Beats for one run from a thread of this process, from `start()` to `stop()`. `client` is a
    redis-py client; `holder` (this host and process) is what the key holds, for messages."""

    def __init__(self, client, run_id: str, holder: dict[str, str], every: float, lost_after: float):
        self.client = client
        self.key = heartbeat_key(run_id)
        self.value = json.dumps(holder)
        self.every = every
        self.lost_after = lost_after
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat_until_stopped, name=f"heartbeat {run_id}", daemon=True)

    def start(self) -> "RunHeartbeat":
        self._beat()
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()
        self._tell_redis(self.client.delete, self.key)  # else it expires by itself

    def _beat_until_stopped(self) -> None:
        while not self.stopped.wait(self.every):
            self._beat()

    def _beat(self) -> None:
        self._tell_redis(self.client.set, self.key, self.value, ex=max(1, round(self.lost_after)))

    def _tell_redis(self, command, *arguments, **options) -> None:
        try:
            command(*arguments, **options)
        except Exception as error:  # Redis away: the run goes on, the next beat tries again
            logger.warning("Could not update the heartbeat %s in Redis: %s", self.key, error)


def last_heartbeat(client, run_id: str) -> dict[str, str] | None:
    """What the run's latest heartbeat holds, None when there is none (expired or never written)."""
    value = client.get(heartbeat_key(run_id))
    return None if value is None else json.loads(value)


def redis_uptime_seconds(client) -> float:
    return float(client.info("server")["uptime_in_seconds"])


class WorkerState(Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"


@dataclass(frozen=True)
class Verdict:
    state: WorkerState
    message: str


def run_worker_verdict(
    task_state: str,
    heartbeat: dict | None,
    *,
    process_alive: bool | None,
    missing_for: float,
    redis_uptime: float,
    lost_after: float,
    confirm_after: float,
    last_host: str,
) -> Verdict:
    """What became of the worker of a started run, from its Celery task's state, its heartbeat (None:
    none in Redis), whether the run's process runs (None: it is on another machine, this process
    cannot tell), how long the heartbeat has been seen missing, how long Redis has been up, and the
    host that last ran it (for the message)."""
    if task_state == "SUCCESS":
        return Verdict(WorkerState.SUCCEEDED, "The run's Celery task succeeded.")
    if task_state == "FAILURE":
        return Verdict(WorkerState.FAILED, "The run's Celery task failed.")
    if heartbeat is not None:
        return Verdict(WorkerState.RUNNING, f"Heartbeat from {heartbeat.get('host')} (pid {heartbeat.get('pid')}).")
    if process_alive:
        return Verdict(
            WorkerState.RUNNING,
            f"No heartbeat in Redis, but the run's process on {last_host or '(unknown)'} runs on this "
            "machine: its worker cannot reach Redis, or the key was deleted. Not lost.",
        )
    if process_alive is False:
        return Verdict(
            WorkerState.LOST,
            f"Lost the run's host {last_host or '(unknown)'}: no heartbeat in Redis, and the run's process "
            f"on this machine is gone (killed, or out of memory). {_RETRIED}",
        )
    if redis_uptime < lost_after:
        return Verdict(
            WorkerState.RUNNING,
            f"No heartbeat, but Redis started {redis_uptime:.0f}s ago (less than {lost_after:.0f}s): "
            "a live worker writes its heartbeat again meanwhile.",
        )
    if missing_for < confirm_after:
        return Verdict(
            WorkerState.RUNNING,
            f"No heartbeat in Redis for {missing_for:.0f}s: a live worker writes it again within "
            f"{confirm_after:.0f}s; the run is lost if it does not.",
        )
    return Verdict(
        WorkerState.LOST,
        f"Lost the run's host {last_host or '(unknown)'}: no heartbeat for {lost_after:.0f}s (its worker "
        f"was killed, or its machine stopped or lost Redis). {_RETRIED}",
    )


_RETRIED = (
    "What the run was writing was never published, and its worker, if it still runs, stops it at its "
    "next beat; run retries launch it again on a live worker."
)
