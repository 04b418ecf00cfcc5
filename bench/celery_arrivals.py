"""Dumps landing in a random order on the Celery deployment, end to end, and what the deployment
itself costs each run (bench/run_overheads.py), from Dagster's own records.

    python -m bench.celery_arrivals                       # 24 dumps of 10,000 rows, 4 workers
    python -m bench.celery_arrivals --dumps 6 --rows 500 --workers 2

The first `--dumps` dumps of fw_assets/dumps.txt are generated into a staging folder, then
deploy/celery/local.sh comes up with `--workers` workers (each a host of `--cores` cores, the
machine's cores dealt out round robin) and its sensors on, and the dumps land in the source folder
(a rename each) in a random order (`--seed`), `--gap` seconds apart, as downloads finish. Each dump
then takes three runs: its signing (`new_dumps`), its decisions (the decisions' automation, once it
and every earlier dump are signed) and its scoring (`stale_losses`: the shipped `demo` recipe
reweights every dump by the built-in probe's losses). The bench waits until every dump is scored,
no run is left and the decisions' automation evaluated after the last run ended; then reads every
run's record and every evaluation (tick) of the three sensors through the webserver's GraphQL, and
prints:

- the whole: wall seconds from the first landing to the last run's end, the CPU seconds of each
  part of the deployment over that time (the workers with their runs, the daemon, the webserver,
  PostgreSQL, Redis) and how busy the machine's cores were, the load average before and after, the
  runs by kind, those that failed, and how many times each dump was decided, tokenized and scored;
- the critical path: the last landing, the last signing run's end, the last decisions and scoring
  runs' creation and end;
- each kind of run's phases and steps, median (range), and the latencies between runs;
- the overheads the model (bench/corpus_model.py) adds to every run.

The results go to bench/results/celery-arrivals-<time>.json (`--overheads` of bench.corpus_model
reads it) and .md. Everything the bench starts is stopped (`local.sh down`) and its folders deleted.
"""

import argparse
import datetime as dt
import json
import os
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import dagster as dg
import psutil

from bench.celery_local import DeployedWebserver, LocalDeployment
from bench.dagster_services import DECISIONS_SENSOR, PROBE_SCORING_SENSOR, kept_asset_keys, signing_asset_keys, wait_for
from bench.run_overheads import (
    BEFORE_START,
    DECISIONS,
    PHASES,
    SCORING,
    SIGNING,
    Overheads,
    RunRecord,
    Spread,
    phase_spreads,
    ready_to_created,
    start_latencies,
    step_spreads,
    tick_durations,
    tick_latencies,
)
from bench.suite import machine
from fw_assets import settings
from fw_assets.definitions import defs
from fw_assets.jobs import probe_losses_job
from fw_assets.partitions import known_dumps
from fw_assets.synthetic import write_sample_dump

REPO = Path(__file__).resolve().parents[1]
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")
COUNTED = ("deduplicated", "tokenized", "probe_loss")
RUN_KINDS = (SIGNING, DECISIONS, SCORING)
SENSORS = ("new_dumps", DECISIONS_SENSOR, PROBE_SCORING_SENSOR)
RUNS = """{ runsOrError(filter: {}) { ... on Runs { results {
  runId jobName status creationTime startTime endTime tags { key value }
  stepStats { stepKey status startTime endTime }
  eventConnection(afterCursor: null) { events { __typename ... on MessageEvent { timestamp } } } } } } }"""
TICKS = """query($sensor: String!) { sensorOrError(sensorSelector: {repositoryName: "__repository__",
  repositoryLocationName: "fw_assets", sensorName: $sensor}) { ... on Sensor { sensorState {
  ticks(limit: 5000) { timestamp endTimestamp status runIds } } } } }"""
MATERIALIZATIONS = """query($key: AssetKeyInput!, $partition: String!) { assetNodeOrError(assetKey: $key) {
  ... on AssetNode { assetMaterializations(partitions: [$partition], limit: 100) { runId } } } }"""


@dataclass(frozen=True)
class Setup:
    dumps: int
    rows: int
    workers: int
    cores: int
    gap: float
    seed: int
    sensor_interval: int
    automation_interval: int


def deployment_cpu(local: LocalDeployment) -> dict[str, float]:
    """CPU seconds so far of each part of the deployment (its processes, the children they reaped
    and their living descendants), by role; the workers together."""
    found: dict[str, float] = {}
    for process in local.status():
        role = "workers" if process.role == "worker" else process.role
        found[role] = found.get(role, 0.0) + _tree_cpu(process.pid)
    return found


def _tree_cpu(pid: int) -> float:
    total = 0.0
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    for member in family:
        try:
            t = member.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            continue
    return total


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine spent busy since boot (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def boot_time() -> float:
    """When the machine booted, in Unix seconds to the hundredth (/proc/stat's is whole seconds)."""
    return time.time() - float(Path("/proc/uptime").read_text().split()[0])


def materialization_counts(webserver: DeployedWebserver, dumps: list[str]) -> dict[str, list[int]]:
    """Per asset of COUNTED, how many times each dump (in crawl order) was materialized."""
    return {asset: [len(webserver.graphql(MATERIALIZATIONS, {"key": {"path": [asset]}, "partition": dump})
                        ["assetNodeOrError"]["assetMaterializations"]) for dump in dumps]
            for asset in COUNTED}


def settled(webserver: DeployedWebserver, dumps: list[str]) -> list[dict] | None:
    """Every run, once each dump is scored, no run is left to finish, and the decisions'
    automation evaluated after the last run ended (so it requests nothing more)."""
    runs = webserver.graphql(RUNS)["runsOrError"]["results"]
    if not runs or any(run["status"] not in FINISHED for run in runs):
        return None
    if any(0 in counts for counts in materialization_counts(webserver, dumps).values()):
        return None
    tick = webserver.latest_ended_tick(DECISIONS_SENSOR)
    last_end = max(run["endTime"] or 0.0 for run in runs)
    return runs if tick and tick["timestamp"] > last_end + 1 else None


def ticks(webserver: DeployedWebserver, sensor: str) -> list[dict]:
    return webserver.graphql(TICKS, {"sensor": sensor})["sensorOrError"]["sensorState"]["ticks"]


def arrive(setup: Setup, work: Path) -> dict:
    """Generate, deploy, land, wait, read the records; always `local.sh down`."""
    dumps = known_dumps()[: setup.dumps]
    root = Path(tempfile.mkdtemp(prefix="fw-arrivals-bench-", dir=work))
    root.chmod(0o755)  # PostgreSQL runs as the postgres user
    for name in ("source/data", "output", "staging"):
        (root / name).mkdir(parents=True)
    for dump in dumps:
        write_sample_dump(root / "staging", dump, rows=setup.rows, files=1)
    order = list(dumps)
    random.Random(setup.seed).shuffle(order)
    local = LocalDeployment(root / "home", root / "source", root / "output", setup.workers, setup.cores)
    local.env.update({settings.SENSOR_INTERVAL_ENV: str(setup.sensor_interval),
                      settings.AUTOMATION_INTERVAL_ENV: str(setup.automation_interval)})
    try:
        webserver = local.up()
        cpu_before, busy_before, load_before = deployment_cpu(local), machine_busy_seconds(), os.getloadavg()
        landed = {}
        for dump in order:
            os.rename(root / "staging" / "data" / dump, root / "source" / "data" / dump)
            landed[dump] = time.time()
            time.sleep(setup.gap)
        runs = wait_for("every dump to be signed, decided and tokenized", lambda: settled(webserver, dumps),
                        3600, every=3, logs=local.logs)
        settled_at = time.time()
        cpu_after, busy_after, load_after = deployment_cpu(local), machine_busy_seconds(), os.getloadavg()
        return {
            "dumps": dumps, "order": order, "landed": landed, "settled": settled_at, "runs": runs,
            "ticks": {sensor: ticks(webserver, sensor) for sensor in SENSORS},
            "counts": materialization_counts(webserver, dumps),
            "cpu": {role: cpu_after.get(role, 0.0) - cpu_before.get(role, 0.0) for role in cpu_after},
            "machine_busy": busy_after - busy_before, "load": [load_before[0], load_after[0]],
            "boot_time": boot_time(), "clock_ticks": os.sysconf("SC_CLK_TCK"),
        }
    finally:
        local.down()
        shutil.rmtree(root, ignore_errors=True)


def step_kinds() -> dict[str, set[str]]:
    """The steps of each kind of run: a dump's signing, its decisions, its scoring; each with the
    steps of its assets' checks that run apart from them (`published_files`, requested with them)."""
    scoring = probe_losses_job.selection.resolve(defs.resolve_asset_graph())
    check_steps: dict[dg.AssetKey, set[str]] = {}
    for checks in defs.asset_checks or ():
        for check in checks.check_keys:
            check_steps.setdefault(check.asset_key, set()).add(checks.node_def.name)
    return {kind: {step for key in keys for step in (key.to_python_identifier(), *check_steps.get(key, ()))}
            for kind, keys in ((SIGNING, signing_asset_keys()), (DECISIONS, kept_asset_keys()), (SCORING, scoring))}


def records(measured: dict) -> list[RunRecord]:
    kinds = step_kinds()
    return [RunRecord.from_graphql(run, kinds, measured["boot_time"], measured["clock_ticks"])
            for run in measured["runs"]]


def report(setup: Setup, measured: dict) -> tuple[str, Overheads]:
    """The tables of the module's docstring, and the overheads for the model."""
    runs = records(measured)
    every_tick = [tick for ticks_ in measured["ticks"].values() for tick in ticks_]
    overheads = Overheads.measured(runs, every_tick, RUN_KINDS)
    start = min(measured["landed"].values())
    lines = [_setup_line(setup), "", *_whole(measured, runs, start), "", *_critical_path(measured, runs, start)]
    lines += ["", *_runs_table(runs), "", *_latencies(measured, runs, every_tick), "",
              f"Overheads per run for the model: {_overheads_line(overheads)}"]
    return "\n".join(lines), overheads


def _setup_line(setup: Setup) -> str:
    return (f"{setup.dumps} dumps of {setup.rows:,} rows landing in a random order (seed {setup.seed}), "
            f"{setup.gap:g} s apart; {setup.workers} workers of {setup.cores} core(s) on {os.cpu_count()} cores; "
            f"new_dumps every {setup.sensor_interval} s, the decisions' automation every "
            f"{setup.automation_interval} s")


def _whole(measured: dict, runs: list[RunRecord], start: float) -> list[str]:
    wall = max(run.ended for run in runs) - start
    cpu, counts = measured["cpu"], measured["counts"]
    kinds = [sum(run.kind == kind for run in runs) for kind in RUN_KINDS]
    failed = sum(run.status != "SUCCESS" for run in runs)
    return [
        "| wall s | deployment CPU s | workers (runs) | daemon | webserver | PostgreSQL | Redis | machine busy, cores "
        "| load before/after | runs (signing, decisions, scoring) | failed | decided | tokenized | scored |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        f"| {wall:.0f} | {sum(cpu.values()):.0f} | {cpu.get('workers', 0):.0f} | {cpu.get('daemon', 0):.0f} "
        f"| {cpu.get('webserver', 0):.0f} | {cpu.get('postgres', 0):.0f} | {cpu.get('redis', 0):.0f} "
        f"| {measured['machine_busy'] / (measured['settled'] - start):.2f} of {os.cpu_count()} "
        f"| {measured['load'][0]:.1f}/{measured['load'][1]:.1f} | {len(runs)} ({', '.join(map(str, kinds))}) "
        f"| {failed} | {_tally(counts['deduplicated'])} | {_tally(counts['tokenized'])} "
        f"| {_tally(counts['probe_loss'])} |",
    ]


def _critical_path(measured: dict, runs: list[RunRecord], start: float) -> list[str]:
    def last(kind: str, moment: str) -> str:
        return f"{max(getattr(r, moment) for r in runs if r.kind == kind) - start:.0f}"

    return [
        "Seconds from the first landing:", "",
        "| last landing | last signing run ended | last decisions run created | started | ended "
        "| last scoring run created | ended | settled (seen) |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|",
        f"| {max(measured['landed'].values()) - start:.0f} | {last(SIGNING, 'ended')} | {last(DECISIONS, 'created')} "
        f"| {last(DECISIONS, 'started')} | {last(DECISIONS, 'ended')} | {last(SCORING, 'created')} "
        f"| {last(SCORING, 'ended')} | {measured['settled'] - start:.0f} |",
    ]


def _runs_table(runs: list[RunRecord]) -> list[str]:
    """Each kind's phases and steps: median (range), and the median's share of the run's median."""
    header = " | ".join(f"{kind} runs" for kind in RUN_KINDS)
    lines = ["Per run, seconds, median (range), and its share of the run (start to end):", "",
             f"| phase | {header} |", "|---|" + "--:|" * len(RUN_KINDS)]
    spreads = {kind: (phase_spreads(runs, kind), step_spreads(runs, kind)) for kind in RUN_KINDS}
    names = [(name, True) for name in PHASES] + [
        (key, False) for kind in RUN_KINDS for key in spreads[kind][1]]
    for name, is_phase in names:
        cells = []
        for kind in RUN_KINDS:
            phases, steps = spreads[kind]
            spread = (phases if is_phase else steps).get(name)
            share = "" if spread is None or name in BEFORE_START else f", {spread.median / phases['run'].median:.0%}"
            cells.append(f"{spread.cell()}{share}" if spread else "")
        if any(cells):
            lines.append(f"| {name if is_phase else f'step `{name}`'} | {' | '.join(cells)} |")
    return lines


def _latencies(measured: dict, runs: list[RunRecord], ticks_: list[dict]) -> list[str]:
    first, between = tick_latencies(runs, ticks_)
    landed = measured["landed"]
    latencies = {
        "start latency: a free worker to the run's start": start_latencies(runs),
        "landed to its signing run created (new_dumps)":
            [r.created - landed[r.dump] for r in runs if r.kind == SIGNING and r.dump in landed],
        "ready (it and every earlier dump signed) to its decisions run created": list(ready_to_created(runs).values()),
        "its signing run's end to its decisions run's start": _signed_to_decided(runs),
        "an evaluation (new_dumps, automation, stale_losses), start to end": tick_durations(ticks_),
        "an evaluation to the first run it requested": first,
        "between two runs one evaluation requested": between,
    }
    lines = ["Between runs, seconds, median (range):", "", "| latency | s | count |", "|---|--:|--:|"]
    for name, values in latencies.items():
        if spread := Spread.of(values):
            lines.append(f"| {name} | {spread.cell()} | {spread.count} |")
    return lines


def _tally(counts: list[int]) -> str:
    """How many dumps had each count: `24 × 1`."""
    return ", ".join(f"{counts.count(n)} × {n}" for n in sorted(set(counts)))


def _signed_to_decided(runs: list[RunRecord]) -> list[float]:
    signed = {r.dump: r.ended for r in runs if r.kind == SIGNING and r.status == "SUCCESS" and r.ended}
    first = {}
    for run in sorted((r for r in runs if r.kind == DECISIONS and r.started), key=lambda r: r.started):
        first.setdefault(run.dump, run.started)
    return [started - signed[dump] for dump, started in first.items() if dump in signed]


def _overheads_line(overheads: Overheads) -> str:
    return ", ".join(f"{name} {value:.2f} s" for name, value in asdict(overheads).items())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.celery_arrivals", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dumps", type=int, default=24, help="the first N dumps of fw_assets/dumps.txt (default 24)")
    parser.add_argument("--rows", type=int, default=10_000, help="documents per dump (default 10,000)")
    parser.add_argument("--workers", type=int, default=4, help="Celery workers, each a host (default 4)")
    parser.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between two dumps landing (default 2)")
    parser.add_argument("--seed", type=int, default=39, help="of the random landing order (default 39)")
    parser.add_argument("--sensor-interval", type=int, default=5, help="new_dumps' interval, s (default 5)")
    parser.add_argument("--automation-interval", type=int, default=settings.DEFAULT_AUTOMATION_INTERVAL_SECONDS,
                        help="the decisions' automation's interval, s (default: the deployment's, "
                             f"{settings.DEFAULT_AUTOMATION_INTERVAL_SECONDS})")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the deployment's folders go (default: the system's temporary folder)")
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args(argv)
    setup = Setup(args.dumps, args.rows, args.workers, args.cores, args.gap, args.seed, args.sensor_interval,
                  args.automation_interval)
    started = dt.datetime.now()
    measured = arrive(setup, args.work.resolve())
    text, overheads = report(setup, measured)
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    stem = args.results / f"celery-arrivals-{started:%Y%m%d-%H%M%S}"
    stem.with_suffix(".json").write_text(json.dumps(
        {"setup": asdict(setup), "machine": machine(), "overheads": asdict(overheads), "measured": measured}, indent=1))
    stem.with_suffix(".md").write_text(text + "\n")
    print(f"\n{stem}.json, {stem}.md")


if __name__ == "__main__":
    main()
