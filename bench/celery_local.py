"""deploy/celery/local.sh driven as a user drives it (up, status, down, env), what can go wrong with
one of its hosts (a worker's process group killed, Redis restarted), its instance as the dagster CLI
sees it, and the GraphQL API of the webserver it started: for the end-to-end tests and
bench/celery_backfill.py."""

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.dagster_services import REPO_ROOT, DagsterServices, descendants, tag, wait_for
from fw_assets.dedup.deduplicated import deduplicated

LOCAL_SH = REPO_ROOT / "deploy" / "celery" / "local.sh"
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")
RUN_TIMES = """query($id: ID!) { runOrError(runId: $id) { ... on Run {
  runId status startTime endTime parentRunId tags { key value } } } }"""
RUN_EVENTS = """query($id: ID!) { runOrError(runId: $id) { ... on Run { eventConnection(afterCursor: null) {
  events { __typename ... on MessageEvent { message timestamp stepKey } } } } } }"""
BACKFILL_STATUS = """query($id: String!) { partitionBackfillOrError(backfillId: $id) {
  ... on PartitionBackfill { status } } }"""


class DeployedWebserver(DagsterServices):
    """What a user does and sees in the UI of a webserver someone else started (its GraphQL API)."""

    def __init__(self, url: str, logs: list[Path]):  # nothing to start: the services are up
        self.url = url
        self.services = []
        self._logs = logs

    @property
    def logs(self) -> list[Path]:
        return self._logs


@dataclass(frozen=True)
class Process:
    role: str
    host: str
    pid: int


class LocalDeployment:
    """`deploy/celery/local.sh` with its own DAGSTER_HOME, source and output folders."""

    def __init__(self, home: Path, source: Path, output: Path, workers: int, cores_per_worker: int):
        self.home = home
        self.env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "FW_SOURCE_DIR": str(source),
            "FW_OUTPUT_DIR": str(output),
            "FW_WORKERS": str(workers),
            "FW_WORKER_CORES": str(cores_per_worker),
            "VIRTUAL_ENV": sys.prefix,  # the interpreter running the tests, with this worktree's code
        }

    def run(self, command: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        completed = subprocess.run([str(LOCAL_SH), command], env=self.env, capture_output=True, text=True,
                                   timeout=timeout)
        if check:
            assert completed.returncode == 0, (
                f"local.sh {command} exited {completed.returncode}:\n{completed.stdout}\n{completed.stderr}"
            )
        return completed

    def up(self) -> DeployedWebserver:
        """`up`; its last line is the webserver's URL."""
        url = self.run("up").stdout.strip().splitlines()[-1]
        return DeployedWebserver(url, self.logs)

    def status(self) -> list[Process]:
        lines = self.run("status", check=False).stdout.strip().splitlines()
        return [Process(role, host, int(pid)) for role, host, pid in (line.split() for line in lines)]

    def down(self) -> None:
        self.run("down")

    @property
    def logs(self) -> list[Path]:
        return sorted((self.state / "logs").glob("*.log"))

    @property
    def state(self) -> Path:
        """local/: pids, logs, ports, passwords, both databases."""
        return self.home / "local"

    def environment(self) -> dict[str, str]:
        """What `local.sh env` exports: the instance's variables and Redis' URL, passwords included."""
        lines = self.run("env").stdout.strip().splitlines()
        return dict(line.removeprefix("export ").split("=", 1) for line in lines)

    def python(self, script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """`script` run by this interpreter in the environment `local.sh env` gives the dagster CLI."""
        env = {**self.env, **self.environment(), "PYTHONPATH": os.pathsep.join(sys.path)}
        return subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True,
                              timeout=timeout, check=True)

    def pid(self, name: str) -> int:
        return int((self.home / "local" / "pids" / name).read_text().split()[0])

    def kill_host(self, host: str) -> float:
        """SIGKILL the process group of worker `host` (its run and the run's children); returns when."""
        os.killpg(self.pid(host), signal.SIGKILL)
        return time.time()

    def restart_redis(self) -> None:
        """Stop Redis as its service manager would (SIGTERM: it writes its append-only file), then `up`."""
        pid = self.pid("redis")
        os.killpg(pid, signal.SIGTERM)
        wait_for("Redis to stop", lambda: not alive(pid), 30, every=0.1)
        self.up()

    def processes(self) -> set[int]:
        """Every process of this deployment now: those `status` names, every one below them, and
        every one started with its DAGSTER_HOME."""
        listed = {process.pid for process in self.status()}
        below = set().union(*(descendants(pid) for pid in listed)) if listed else set()
        return listed | below | started_with(f"DAGSTER_HOME={self.home}")


def run_times(webserver: DeployedWebserver, run_id: str) -> dict:
    """The run's status, start and end (Unix seconds), the run it re-executes, and its tags."""
    return webserver.graphql(RUN_TIMES, {"id": run_id})["runOrError"]


def run_events(webserver: DeployedWebserver, run_id: str) -> list[dict]:
    """The run's events in order: `__typename`, `message`, `timestamp` (milliseconds, a string), `stepKey`."""
    return webserver.graphql(RUN_EVENTS, {"id": run_id})["runOrError"]["eventConnection"]["events"]


def backfill_status(webserver: DeployedWebserver, backfill_id: str) -> str:
    return webserver.graphql(BACKFILL_STATUS, {"id": backfill_id})["partitionBackfillOrError"]["status"]


def step_under_way(webserver: DeployedWebserver, backfill_id: str, steps=None) -> tuple[dict, str, str] | None:
    """A started run of the backfill with a step in progress (one of `steps`, when given), that step
    and the run's host."""
    for run in webserver.runs({"dagster/backfill": backfill_id}):
        under_way = [s["stepKey"] for s in run["stepStats"] if s["status"] == "IN_PROGRESS"]
        under_way = [step for step in under_way if steps is None or step in steps]
        if run["status"] == "STARTED" and under_way and tag(run, "fw_assets/host"):
            return run, under_way[0], tag(run, "fw_assets/host")
    return None


def settled(webserver: DeployedWebserver, dumps) -> list[dict] | None:
    """Every run, once none is left to finish or to retry and the decisions of `dumps` are current
    (after `stale_dedup` re-decided those decided before an earlier dump was signed)."""
    runs = webserver.runs({})
    if not runs or any(map(_unfinished, runs)):
        return None
    fresh = all(webserver.stale_status(deduplicated.key, dump)[0] == "FRESH" for dump in dumps)
    return runs if fresh else None


def unsettled(webserver: DeployedWebserver, dumps) -> str:
    """What `settled` waits for, a line each: the runs not finished or not yet retried (status,
    job, partition, host, steps), the dumps whose decisions are not current and why."""
    lines = [f"run {r['runId']} {r['status']} job {r['jobName']} "
             f"partition {tag(r, 'dagster/partition')} host {tag(r, 'fw_assets/host')} "
             f"will_retry {tag(r, 'dagster/will_retry')} steps {[(s['stepKey'], s['status']) for s in r['stepStats']]}"
             for r in webserver.runs({}) if _unfinished(r)]
    for dump in dumps:
        status, causes = webserver.stale_status(deduplicated.key, dump)
        if status != "FRESH":
            lines.append(f"deduplicated[{dump}] {status}: {'; '.join(causes)}")
    return "\n".join(lines) or "(settled now)"


def _unfinished(run: dict) -> bool:
    return run["status"] not in FINISHED or (tag(run, "dagster/will_retry") == "true"
                                             and not tag(run, "dagster/auto_retry_run_id"))


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def started_with(variable: str) -> set[int]:
    """The processes whose environment holds `variable` (NAME=value)."""
    found = set()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if variable.encode() in environ.read_bytes().split(b"\0"):
                found.add(int(environ.parent.name))
        except OSError:
            continue
    return found - {os.getpid()}
