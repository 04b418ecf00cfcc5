"""A backfill of dumps over Celery workers (deploy/celery/local.sh) against one machine running the
same dumps one after another, and the cost of a worker SIGKILLed in the middle of a step.

    python -m bench.celery_backfill                   # 3 dumps of 100,000 documents on this machine's cores
    python -m bench.celery_backfill --rows 20000

Three deployments, each from empty folders, on the same generated dumps and the same cores:
  one machine   one worker holding every core: the dumps' runs one after another
  two workers   the cores shared out between two workers (hosts), one run each at a time
  two, killed   the same, one worker's process group SIGKILLed at the first step under way
Each backfill is launched through the webserver's GraphQL, as the UI launches it, and timed until
every run ended and every dump's decisions are current (stale_dedup re-decides a dump decided
before an earlier dump was signed). Prints wall seconds, the workers' CPU seconds (user + system,
with their children), the largest worker's peak RSS and how many runs it took (a lost run's retry,
stale_dedup's re-decisions); for the kill, seconds from the SIGKILL to
the run marked failed and to its retry started.
"""

import argparse
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.celery_local import LocalDeployment, run_times, settled, step_under_way
from bench.dagster_services import signing_asset_keys, tag, wait_for
from fw_assets.synthetic import write_sample_dump

DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2013-48", "CC-MAIN-2014-10")
SETTLE_TIMEOUT = 3600


@dataclass(frozen=True)
class Figures:
    deployment: str
    wall_seconds: float
    cpu_seconds: float
    peak_rss_gib: float
    runs: int
    kill: str = ""


class WorkerMeter:
    """The CPU seconds and peak RSS of the workers' process trees, sampled every half second."""

    def __init__(self, deployment: LocalDeployment):
        self.workers = [psutil.Process(p.pid) for p in deployment.status() if p.role == "worker"]
        self.cpu = {worker.pid: 0.0 for worker in self.workers}
        self.peak_rss = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.stopped.wait(0.5):
            for worker in self.workers:
                try:
                    tree = [worker, *worker.children(recursive=True)]
                    times = worker.cpu_times()
                    self.cpu[worker.pid] = times.user + times.system + times.children_user + times.children_system
                    self.peak_rss = max(self.peak_rss, sum(_rss(p) for p in tree))
                except psutil.NoSuchProcess:  # killed: its last sample stands
                    continue

    def stop(self) -> tuple[float, float]:
        self.stopped.set()
        self.thread.join()
        return sum(self.cpu.values()), self.peak_rss / 2**30


def _rss(process: psutil.Process) -> int:
    try:
        return process.memory_info().rss
    except psutil.NoSuchProcess:
        return 0


def backfill(name: str, source: Path, workers: int, cores: int, kill: bool) -> Figures:
    root = Path(tempfile.mkdtemp(prefix="fw-celery-bench-"))
    root.chmod(0o755)  # PostgreSQL runs as the postgres user
    deployment = LocalDeployment(root / "home", source, root / "output", workers, cores)
    try:
        webserver = deployment.up()
        webserver.stop_sensor("new_dumps")
        meter = WorkerMeter(deployment)
        began = time.time()
        backfill_id = webserver.launch_backfill(signing_asset_keys(), list(DUMPS))
        killed = ""
        if kill:
            run, step, host = wait_for("a step under way", lambda: step_under_way(webserver, backfill_id),
                                       600, every=0.2, logs=deployment.logs)
            at = deployment.kill_host(host)
            failed = wait_for("the lost run to fail", lambda: _ended(webserver, run["runId"]), 600, every=1)
            retry = wait_for("its retry to start", lambda: _retry_started(webserver, failed), 600, every=1)
            killed = (f"SIGKILL of {host} during {step}: run failed after {failed['endTime'] - at:.1f} s, "
                      f"its retry started after {retry['startTime'] - at:.1f} s")
        runs = wait_for("the backfill to settle", lambda: settled(webserver, DUMPS), SETTLE_TIMEOUT, every=2,
                        logs=deployment.logs)
        wall = time.time() - began
        cpu, rss = meter.stop()
        return Figures(name, wall, cpu, rss, len(runs), killed)
    finally:
        deployment.down()
        shutil.rmtree(root, ignore_errors=True)


def _ended(webserver, run_id: str) -> dict | None:
    times = run_times(webserver, run_id)
    return times if times["status"] == "FAILURE" else None


def _retry_started(webserver, failed: dict) -> dict | None:
    retry_id = tag(run_times(webserver, failed["runId"]), "dagster/auto_retry_run_id")
    retry = run_times(webserver, retry_id) if retry_id else None
    return retry if retry and retry["startTime"] else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.celery_backfill", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="documents per dump (default 100,000)")
    parser.add_argument("--work", type=Path, default=Path("bench/work/celery"), help="where the dumps are generated")
    args = parser.parse_args(argv)
    source = args.work.resolve() / f"source-{args.rows}"
    for dump in DUMPS:
        if not (source / "data" / dump).is_dir():
            write_sample_dump(source, dump, rows=args.rows, files=1)
    cores = len(os.sched_getaffinity(0))
    figures = [
        backfill("one machine (1 worker)", source, 1, cores, kill=False),
        backfill("two workers", source, 2, max(1, cores // 2), kill=False),
        backfill("two workers, one killed", source, 2, max(1, cores // 2), kill=True),
    ]
    print(f"\n{len(DUMPS)} dumps of {args.rows:,} documents, {cores} cores\n")
    print("| deployment | runs | wall s | CPU s | peak RSS GiB (largest worker) |\n|---|---|---|---|---|")
    for f in figures:
        print(f"| {f.deployment} | {f.runs} | {f.wall_seconds:.1f} | {f.cpu_seconds:.1f} | {f.peak_rss_gib:.2f} |")
    for f in figures:
        if f.kill:
            print(f"\n{f.deployment}: {f.kill}")


if __name__ == "__main__":
    main()
