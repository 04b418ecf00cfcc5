"""What the deployment itself costs a run, read from Dagster's own records of the runs: when each
run was created, launched, when its process started, when the run and each step started and ended,
which host ran it, and which automation evaluation requested it.

A run's life, as its records time it:

    created ─queued─> starting ─to the worker─> process ─run process start─> started ─setup─>
      first step ... steps (and the gaps between them) ... last step ends ─teardown─> ended

- *queued*: in Dagster's run queue (RUN_ENQUEUED) until the daemon launches it (RUN_STARTING),
  waiting for a free worker (the queue's limit is the number of workers) and the daemon's pass;
- *to the worker*: the launcher sending the run's task to Redis, a worker taking it and starting
  the run's process (the process's start time, in its `fw_assets/pid`/`fw_assets/process_start`
  tags, clock ticks since boot);
- *run process start*: Python, the imports and the code location's load, up to RUN_START;
- *setup*: from RUN_START to the first step's start (the execution plan, resources);
- *between steps*: the step span less the steps' own durations (events, materializations, checks);
- *teardown*: from the last step's end to the run's end.

Latencies across runs: *start latency*, from the later of the run's creation and the end of the
previous run on its host to its start (what a freed or idle worker costs before the next run
begins); for a dump's decisions, *ready → created*, from the moment the dump and every earlier dump
of the set are signed to the decisions' run being created by the automation (its interval and its
evaluation); and of a sensor's or the automation's evaluation (a tick), the time to the first run it
requested and between two runs it requested (a tick creates its runs one after another).
Plain Python over dicts shaped as the webserver's GraphQL answers them, so that the bench
(bench/celery_arrivals.py), the model (bench/corpus_model.py) and the tests read the same figures.
"""

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Run lifecycle events, by their GraphQL type name.
STARTING, STARTED = "RunStartingEvent", "RunStartEvent"
PROCESS_START_TAG = "fw_assets/process_start"
SIGNING, DECISIONS, SCORING = "signing", "decisions", "scoring"
PHASES = ("queued", "to the worker", "run process start", "setup", "steps", "between steps", "teardown", "run",
          "created → ended")
# Phases before RUN_START, apart from the run's own time
BEFORE_START = ("queued", "to the worker", "run process start", "created → ended")


@dataclass(frozen=True)
class Step:
    key: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class RunRecord:
    """One run as its records time it (Unix seconds); None where a moment was never recorded."""

    run_id: str
    kind: str  # a key of the `kinds` it was read with (SIGNING, DECISIONS, SCORING), else its job name
    dump: str | None
    host: str | None
    status: str
    created: float
    starting: float | None
    process_started: float | None
    started: float | None
    ended: float | None
    steps: tuple[Step, ...]

    @classmethod
    def from_graphql(
        cls, run: dict, kinds: dict[str, set[str]], boot_time: float | None = None, ticks_per_second: int = 100,
    ) -> "RunRecord":
        """From a `Run` with runId jobName status creationTime startTime endTime tags{key value}
        stepStats{stepKey startTime endTime} eventConnection{events{__typename ... on MessageEvent
        {timestamp}}}. Its kind is the first of `kinds` (kind -> step keys) holding all its steps.
        Its process's start is read from its tags given the machine's `boot_time` (Unix seconds)."""
        tags = {t["key"]: t["value"] for t in run["tags"]}
        first: dict[str, float] = {}
        for event in run["eventConnection"]["events"]:
            if event["__typename"] in (STARTING, STARTED) and event.get("timestamp"):
                first.setdefault(event["__typename"], int(event["timestamp"]) / 1000)
        steps = tuple(sorted(
            (Step(s["stepKey"], s["startTime"], s["endTime"]) for s in run["stepStats"]
             if s.get("startTime") and s.get("endTime")),
            key=lambda step: step.start,
        ))
        keys = {s["stepKey"] for s in run["stepStats"]}
        ticks = tags.get(PROCESS_START_TAG, "")
        process_started = boot_time + int(ticks) / ticks_per_second if boot_time and ticks.isdigit() else None
        kind = next((kind for kind, steps in kinds.items() if keys and keys <= steps), run["jobName"])
        return cls(
            run_id=run["runId"], kind=kind, dump=tags.get("dagster/partition"), host=tags.get("fw_assets/host"),
            status=run["status"], created=run["creationTime"], starting=first.get(STARTING),
            process_started=process_started, started=run.get("startTime") or first.get(STARTED),
            ended=run.get("endTime"), steps=steps,
        )

    def phases(self) -> dict[str, float]:
        """The run's phases (PHASES) in seconds; those whose ends were not recorded are left out."""
        moments = [("queued", self.created, self.starting), ("to the worker", self.starting, self.process_started),
                   ("run process start", self.process_started, self.started), ("run", self.started, self.ended),
                   ("created → ended", self.created, self.ended)]
        if self.steps:
            first, last = self.steps[0].start, max(step.end for step in self.steps)
            moments += [("setup", self.started, first), ("steps", first, last), ("teardown", last, self.ended)]
        found = {name: end - start for name, start, end in moments if start is not None and end is not None}
        if self.steps:
            found["between steps"] = found["steps"] - sum(step.seconds for step in self.steps)
        return {name: found[name] for name in PHASES if name in found}


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, values: Iterable[float]) -> "Spread | None":
        values = sorted(values)
        return cls(statistics.median(values), values[0], values[-1], len(values)) if values else None

    def cell(self) -> str:
        return f"{self.median:.2f} ({self.low:.2f}–{self.high:.2f})"


def phase_spreads(runs: Sequence[RunRecord], kind: str) -> dict[str, Spread]:
    """Each phase's median and range over the successful runs of `kind`."""
    per_run = [run.phases() for run in runs if run.kind == kind and run.status == "SUCCESS"]
    return {name: spread for name in PHASES
            if (spread := Spread.of(p[name] for p in per_run if name in p)) is not None}


def step_spreads(runs: Sequence[RunRecord], kind: str) -> dict[str, Spread]:
    """Each step's duration over the successful runs of `kind`, in the order the steps run."""
    durations: dict[str, list[float]] = {}
    for run in runs:
        if run.kind == kind and run.status == "SUCCESS":
            for step in run.steps:
                durations.setdefault(step.key, []).append(step.seconds)
    return {key: Spread.of(values) for key, values in durations.items()}


def start_latencies(runs: Sequence[RunRecord]) -> list[float]:
    """For every started run: its start less the later of its creation and the end of the run
    before it on its host (the first run of a host counts from its creation)."""
    latencies = []
    by_host: dict[str, list[RunRecord]] = {}
    for run in runs:
        if run.started is not None and run.host:
            by_host.setdefault(run.host, []).append(run)
    for host_runs in by_host.values():
        host_runs.sort(key=lambda run: run.started)
        previous_end = None
        for run in host_runs:
            free_since = max(run.created, previous_end) if previous_end is not None else run.created
            latencies.append(run.started - free_since)
            previous_end = run.ended if run.ended is not None else previous_end
    return latencies


def ready_to_created(runs: Sequence[RunRecord]) -> dict[str, float]:
    """Per dump, the first decisions run's creation less the moment the dump and every earlier dump
    of the set had a successful signing run ended (crawl order is the dumps' sort order)."""
    signed: dict[str, float] = {}
    for run in runs:
        if run.kind == SIGNING and run.status == "SUCCESS" and run.dump and run.ended is not None:
            signed[run.dump] = min(signed.get(run.dump, run.ended), run.ended)
    first_decisions: dict[str, float] = {}
    for run in runs:
        if run.kind == DECISIONS and run.dump:
            first_decisions[run.dump] = min(first_decisions.get(run.dump, run.created), run.created)
    found = {}
    for dump, created in first_decisions.items():
        earlier = [ended for signed_dump, ended in signed.items() if signed_dump <= dump]
        if dump in signed:
            found[dump] = created - max(earlier)
    return found


def tick_latencies(runs: Sequence[RunRecord], ticks: Sequence[dict]) -> tuple[list[float], list[float]]:
    """Of each tick (timestamp, runIds) that requested runs: its timestamp to the first run's
    creation, and the gaps between its runs' creations."""
    created = {run.run_id: run.created for run in runs}
    first, between = [], []
    for tick in ticks:
        times = sorted(created[run_id] for run_id in tick.get("runIds") or () if run_id in created)
        if times:
            first.append(times[0] - tick["timestamp"])
            between += [b - a for a, b in zip(times, times[1:])]
    return first, between


def tick_durations(ticks: Sequence[dict]) -> list[float]:
    """Each finished tick's evaluation time (timestamp to endTimestamp)."""
    return [tick["endTimestamp"] - tick["timestamp"] for tick in ticks if tick.get("endTimestamp")]


@dataclass(frozen=True)
class Overheads:
    """The per-run figures the model adds to a run's work, in seconds (medians over the runs measured)."""

    start_latency: float  # a free worker to the run's start
    setup: float  # RUN_START to the first step
    between_steps: float  # per run, less the steps' own durations
    teardown: float  # the last step's end to the run's end
    first_request: float  # an evaluation (tick) to the first run it requested
    per_request: float  # between two runs one evaluation requested

    @classmethod
    def measured(cls, runs: Sequence[RunRecord], ticks: Sequence[dict], kinds: Sequence[str]) -> "Overheads":
        """From the successful runs of `kinds` and the ticks that requested runs."""
        per_run = [run.phases() for run in runs if run.status == "SUCCESS" and run.kind in kinds]

        def median(name: str) -> float:
            return statistics.median(p[name] for p in per_run if name in p)

        first, between = tick_latencies(runs, ticks)
        return cls(
            start_latency=statistics.median(start_latencies(runs)),
            setup=median("setup"), between_steps=median("between steps"), teardown=median("teardown"),
            first_request=statistics.median(first) if first else 0.0,
            per_request=statistics.median(between) if between else 0.0,
        )
