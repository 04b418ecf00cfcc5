"""The whole corpus on H hosts of C cores, by model: its critical path and wall time from the
per-stage costs at FineWeb-Edu's text length and the deployment's measured overheads.

    python -m bench.corpus_model                                   # 16 × 16, 64 × 16 and 1 × 2
    python -m bench.corpus_model --hosts 16x16 64x16 --runs-per-host 4 --read-gbps 2 5 10 20 inf --scaling amdahl
    python -m bench.corpus_model --overheads bench/results/celery-arrivals-<time>.json

What it models, as the Celery deployment runs a backfill of every dump (docs/operations-more-than-
one-machine.md):

- **Runs.** Each dump has a signing run (bucketing, signing: `raw` to `band_key_index`), a
  decisions run (deciding, tokenizing: `deduplicated`, `tokenized`) and a scoring run (`probe_loss`,
  the built-in probe), which the `stale_losses` sensor requests every 60 s for the dumps tokenized
  since, when a recipe reweights by the probe's losses (the shipped `demo` recipe does;
  `--no-scoring` leaves it out).
- **Packing.** A host runs `runs_per_host` workers, each one run at a time on its share of the
  host's cores (the deployment as shipped: one worker, every core). Runs wait in one queue, first
  created first started (Dagster's run queue). A backfill requests every signing run at once, in
  crawl order; an evaluation (the backfill's, a sensor's, the automation's) creates the runs it
  requests one after another, at the measured pace.
- **The order of decisions.** The decisions' automation evaluates every `automation_interval`
  seconds (`FW_AUTOMATION_INTERVAL_SECONDS`) and requests a dump's decisions once the dump and every
  earlier dump are signed (in a backfill of all dumps every earlier dump is in flight, so the last
  dump's decisions wait for all the signing). Its runs queue behind the runs created before them.
- **A step's time.** Amdahl's law on the run's cores: `CPU × (s + (1 − s) / cores)`, with each
  stage's serial share `s` from its wall and CPU seconds on 2 quiet cores; *ideal*: s = 0, every
  core busy throughout (`--scaling` picks either table, both by default). The CPU is the stage's
  measured CPU per document, scaled to a dump of the corpus' mean size (source documents for
  bucketing, kept documents for the rest); deciding adds a cost per document of every earlier dump
  (it reads their band keys and signatures whole).
- **Storage.** The steps read from the shared storage (the source; the bucketed text, which
  tokenizing reads on another host than the one that wrote it; the minhash files; the token files)
  at most `read_rate` bytes a second for all hosts together, shared max-min fairly among the steps
  reading at once; a step goes as fast as the slower of its cores and its share. Signing reads the
  text its own run has just written, from the host's page cache; every other read is counted in
  full (a host's page cache is smaller than the 200 GB of minhash files the last decisions read).
  Writes and the network are not modelled.
- **Overheads.** Every run pays the measured start latency (a free worker to the run's start),
  setup, the gaps between steps and teardown; an evaluation's first run is created a measured time
  after it begins, each further one a measured time after the one before (bench/run_overheads.py;
  by default the figures bench/celery_arrivals.py measured on this machine, an upper bound).
- **Dumps.** Every dump is the corpus' mean (source and kept documents / 110); the real dumps
  differ in size, so the largest ones lengthen each wave.
"""

import argparse
import bisect
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from fw_assets.settings import DEFAULT_AUTOMATION_INTERVAL_SECONDS

SIGNING, DECISIONS, SCORING = "signing", "decisions", "scoring"
RUN_KINDS = (SIGNING, DECISIONS, SCORING)
SOURCE, KEPT = "source", "kept"
GB = 1e9
SCORING_INTERVAL_SECONDS = 60  # the stale_losses sensor's (fw_assets/automation/stale_losses.py)


@dataclass(frozen=True)
class Corpus:
    """FineWeb-Edu (README, *What the whole corpus costs*): its dumps (fw_assets/dumps.txt), source
    documents and bytes, and the documents the sampler keeps."""

    dumps: int = 110
    source_documents: float = 1.3e9
    kept_documents: float = 450e6
    source_bytes: float = 4.2e12

    def per_dump(self, unit: str) -> float:
        return (self.source_documents if unit == SOURCE else self.kept_documents) / self.dumps


@dataclass(frozen=True)
class Stage:
    """One stage of a dump's chain: the kind of run it is part of (SIGNING, DECISIONS, SCORING), its
    CPU seconds on the measured dump (MEASURED), what its work grows with (SOURCE or KEPT
    documents), the bytes it reads from the shared storage per such document, and its serial share
    (Amdahl)."""

    name: str
    run_kind: str
    cpu_seconds: float
    unit: str
    read_bytes_per_document: float
    serial_share: float


@dataclass(frozen=True)
class Measured:
    """The dump the stages' CPU seconds were measured on."""

    source_documents: float
    kept_documents: float

    def documents(self, unit: str) -> float:
        return self.source_documents if unit == SOURCE else self.kept_documents


# --- The per-stage inputs: replace these figures when the stages are measured again. -------------
# CPU seconds: the chain through the CLI (`python -m bench.scale --rows 4000000 --files 22`, the
# generator's default text lengths, FineWeb-Edu's: 3,403 characters mean, 2,398 median) on
# 4,000,000 source documents, 1,260,000 kept; 2 shared cores; each step's whole process, its CLI's
# start included.
MEASURED = Measured(source_documents=4_000_000, kept_documents=1_260_000)
CORPUS = Corpus()
# Bytes read from the shared storage per document: the source (4.2 TB over 1.3 billion documents);
# the bucketed text (en/, 0.93 TB over the 450 million kept) and the token files (1.94 TB), from the
# output table at 12M of docs/benchmarks.md; a dump's minhash keys and signatures, 61 MB per 139,000
# documents (docs/benchmarks.md, *What each earlier dump adds*). Signing reads the text its own run
# has just written: from the host's page cache.
SOURCE_BYTES_PER_DOCUMENT = CORPUS.source_bytes / CORPUS.source_documents
EN_BYTES_PER_KEPT = 0.93e12 / CORPUS.kept_documents
TOKEN_BYTES_PER_KEPT = 1.94e12 / CORPUS.kept_documents
MINHASH_BYTES_PER_KEPT = 61e6 / 139_000
# Serial shares, 2 × wall / CPU − 1 on 2 quiet cores (docs/benchmarks.md): bucketing 28.0 s for
# 49.0 CPU s (*Bucketing a dump*, `fw_dagster` at 4M), signing 30.7 for 57.7 (*Against datatrove*,
# `minhash`), deciding 4.1 for 5.1 (the same table, `minhash` + decisions less `minhash`),
# tokenizing 30.0 for 44.9 (*At four times the size*); scoring (the built-in probe) took no more CPU
# than wall seconds at 1M, 4M and 12M (*Measured: 1M, 4M and 12M documents a dump*): one core.
STAGES = (
    Stage("bucketing", SIGNING, 55.0, SOURCE, SOURCE_BYTES_PER_DOCUMENT, 0.14),
    Stage("signing", SIGNING, 62.0, KEPT, 0.0, 0.06),
    Stage("deciding", DECISIONS, 12.0, KEPT, MINHASH_BYTES_PER_KEPT, 0.61),
    Stage("tokenizing", DECISIONS, 50.0, KEPT, EN_BYTES_PER_KEPT, 0.34),
    Stage("scoring", SCORING, 73.0, KEPT, TOKEN_BYTES_PER_KEPT, 1.0),
)


@dataclass(frozen=True)
class EarlierDumps:
    """What each earlier dump adds to a dump's deciding, per kept document of the earlier dump: CPU
    seconds, the bytes of its band keys and signatures (read whole, their digests checked), and the
    serial share (the files are mapped and probed on the step's threads, their matches folded in
    crawl order on one)."""

    cpu_seconds_per_document: float
    read_bytes_per_document: float
    serial_share: float


# ~27 ms of CPU and 61 MB per earlier dump of 139,000 documents, of which the fold ~5 ms
# (docs/benchmarks.md, *What each earlier dump adds*).
EARLIER_DUMPS = EarlierDumps(27e-3 / 139_000, MINHASH_BYTES_PER_KEPT, 5 / 27)


@dataclass(frozen=True)
class Overheads:
    """Seconds the deployment costs beside the steps' work (bench/run_overheads.py measures them)."""

    start_latency: float  # a free worker to the run's start
    setup: float  # the run's start to its first step
    between_steps: float  # per run
    teardown: float  # the last step's end to the run's end
    first_request: float  # an evaluation's start to the first run it creates
    per_request: float  # between two runs one evaluation creates

    @classmethod
    def read(cls, path: Path) -> "Overheads":
        """The `overheads` of a bench/celery_arrivals.py result."""
        return cls(**json.loads(path.read_text())["overheads"])


# Measured by `python -m bench.celery_arrivals` on this page's 2-core machine (docs/benchmarks.md,
# *The corpus on many hosts*): medians over 72 runs and 12 evaluations, 4 workers sharing the 2
# cores with other work (load 6 to 15): an upper bound.
MEASURED_OVERHEADS = Overheads(start_latency=11.97, setup=0.47, between_steps=0.04, teardown=0.11,
                               first_request=1.43, per_request=1.23)


@dataclass(frozen=True)
class Cluster:
    hosts: int
    cores: int
    runs_per_host: int = 1
    read_rate: float = math.inf  # bytes a second from the shared storage, all hosts together

    @property
    def run_cores(self) -> int:
        return max(1, self.cores // self.runs_per_host)

    @property
    def label(self) -> str:
        return f"{self.hosts} × {self.cores}"


@dataclass(frozen=True)
class Work:
    """A step: its CPU seconds, its seconds on the run's cores with storage to spare, its bytes read."""

    stage: str
    cpu: float
    seconds: float
    read: float


@dataclass(frozen=True)
class Model:
    corpus: Corpus = CORPUS
    stages: tuple[Stage, ...] = STAGES
    measured: Measured = MEASURED
    earlier_dumps: EarlierDumps = EARLIER_DUMPS
    overheads: Overheads = MEASURED_OVERHEADS
    automation_interval: float = DEFAULT_AUTOMATION_INTERVAL_SECONDS
    scoring: bool = True
    ideal: bool = False  # every step keeps all its cores busy

    def kinds(self) -> tuple[str, ...]:
        return RUN_KINDS if self.scoring else (SIGNING, DECISIONS)

    def stage_cpu(self, stage: Stage) -> float:
        """CPU seconds of `stage` on one dump of the corpus' mean size."""
        return stage.cpu_seconds * self.corpus.per_dump(stage.unit) / self.measured.documents(stage.unit)

    def work(self, kind: str, rank: int, cores: int) -> list[Work]:
        """The steps of the `kind` run of the dump at `rank` (0: the first in crawl order) on `cores`."""
        found = []
        for stage in (s for s in self.stages if s.run_kind == kind):
            found.append(self._work(stage.name, self.stage_cpu(stage), stage.serial_share, cores,
                                    stage.read_bytes_per_document * self.corpus.per_dump(stage.unit)))
            if stage.name == "deciding" and rank:
                earlier, cost = rank * self.corpus.per_dump(KEPT), self.earlier_dumps
                found.append(self._work("deciding: earlier dumps", earlier * cost.cpu_seconds_per_document,
                                        cost.serial_share, cores, earlier * cost.read_bytes_per_document))
        return found

    def _work(self, name: str, cpu: float, serial_share: float, cores: int, read: float) -> Work:
        serial = 0.0 if self.ideal else serial_share
        return Work(name, cpu, cpu * (serial + (1 - serial) / cores), read)

    def every_step(self) -> list[Work]:
        return [w for kind in self.kinds() for rank in range(self.corpus.dumps) for w in self.work(kind, rank, 1)]

    def stage_totals(self) -> dict[str, tuple[float, float]]:
        """Per step (deciding's earlier dumps apart), over the corpus: CPU-hours and bytes read."""
        totals: dict[str, tuple[float, float]] = {}
        for w in self.every_step():
            cpu, read = totals.get(w.stage, (0.0, 0.0))
            totals[w.stage] = (cpu + w.cpu / 3600, read + w.read)
        return totals

    def cpu_hours(self) -> float:
        return sum(w.cpu for w in self.every_step()) / 3600

    def read_bytes(self) -> float:
        return sum(w.read for w in self.every_step())


@dataclass
class Run:
    kind: str
    rank: int
    created: float
    segments: list  # in order: seconds of overhead (float) and Work
    taken: float | None = None  # when a worker became free for it (its start latency begins)
    ended: float | None = None
    left: float = 0.0  # of the current segment: seconds of an overhead, or the share of a Work
    order: int = 0  # creation order, for the queue's ties


@dataclass(frozen=True)
class Outcome:
    """One simulated backfill of every dump; times in seconds from its launch."""

    cluster: Cluster
    wall: float
    signing_ended: float  # the last signing run's end
    last_decisions_created: float
    last_decisions_ended: float
    first_signing_run: float  # the first dump's signing run, its start latency included
    last_decisions_run: float  # the last dump's decisions run, its start latency included
    cpu_hours: float
    signing_read_rate: float  # bytes a second the signing phase reads with storage to spare
    later_read_rate: float  # the same, from the last signing run's end to the end

    @property
    def busy_share(self) -> float:
        return self.cpu_hours * 3600 / (self.wall * self.cluster.hosts * self.cluster.cores)


def simulate(model: Model, cluster: Cluster) -> Outcome:
    """A backfill of every dump of `model.corpus` on `cluster` (see the module). Its read rates are
    those with storage to spare: below them the phase is storage-bound."""
    outcome = _Simulation(model, cluster).run()
    if math.isinf(cluster.read_rate):
        return outcome
    unbounded = _Simulation(model, replace(cluster, read_rate=math.inf)).run()
    return replace(outcome, signing_read_rate=unbounded.signing_read_rate, later_read_rate=unbounded.later_read_rate)


class _Simulation:
    """Time advanced from event to event: a segment of a run ending, a run created, an evaluation."""

    def __init__(self, model: Model, cluster: Cluster):
        self.model, self.cluster = model, cluster
        self.slots: list[Run | None] = [None] * (cluster.hosts * cluster.runs_per_host)
        self.queue: list[Run] = []  # by creation time
        self.runs: list[Run] = []
        self.requested: set[tuple[str, int]] = set()
        self.now = 0.0
        self.reads = dict.fromkeys(RUN_KINDS, 0.0)
        # [next evaluation, interval, kind it requests, kind whose runs it follows]
        self.evaluations = [[model.automation_interval, model.automation_interval, DECISIONS, SIGNING]]
        if model.scoring:
            self.evaluations.append([SCORING_INTERVAL_SECONDS, SCORING_INTERVAL_SECONDS, SCORING, DECISIONS])
        self._request(SIGNING, range(model.corpus.dumps), at=0.0)

    def _request(self, kind: str, ranks, at: float) -> None:
        """An evaluation at `at` creating runs one after another."""
        o = self.model.overheads
        for count, rank in enumerate(ranks):
            segments = [o.start_latency, o.setup, *self.model.work(kind, rank, self.cluster.run_cores),
                        o.between_steps + o.teardown]
            created = at + o.first_request + count * o.per_request
            kept = [s for s in segments if (s.seconds if isinstance(s, Work) else s) > 0]
            run = Run(kind, rank, created, kept or [0.0], order=len(self.runs))
            self.requested.add((kind, rank))
            bisect.insort(self.queue, run, key=lambda r: (r.created, r.order))
            self.runs.append(run)

    def _evaluate(self, kind: str, after: str) -> None:
        """Request `kind` for the dumps whose `after` run ended: decisions once the dump and every
        earlier one are signed, scoring once the dump is decided."""
        done = {r.rank for r in self.runs if r.kind == after and r.ended is not None}
        if kind == DECISIONS:
            done = decidable(done)
        self._request(kind, sorted(rank for rank in done if (kind, rank) not in self.requested), at=self.now)

    def _start_queued(self) -> None:
        for index, slot in enumerate(self.slots):
            if not self.queue or self.queue[0].created > self.now:
                return
            if slot is None:
                run = self.queue.pop(0)
                run.taken = self.now
                self._begin_segment(run)
                self.slots[index] = run

    @staticmethod
    def _begin_segment(run: Run) -> None:
        segment = run.segments[0]
        run.left = 1.0 if isinstance(segment, Work) else float(segment)

    def _rates(self) -> dict[int, float]:
        """Per slot running a Work, the share of it done per second: the slower of its cores and its
        max-min fair share of the storage's read rate."""
        working = {i: r.segments[0] for i, r in enumerate(self.slots) if r and isinstance(r.segments[0], Work)}
        demand = {i: w.read / w.seconds for i, w in working.items() if w.read > 0}
        granted = max_min_fair(demand, self.cluster.read_rate)
        return {i: granted[i] / w.read if i in granted else 1 / w.seconds for i, w in working.items()}

    def run(self) -> Outcome:
        total = len(self.model.kinds()) * self.model.corpus.dumps
        ended = 0
        while ended < total:
            self._start_queued()
            rates = self._rates()
            waits = [run.left / rates[i] if i in rates else run.left for i, run in enumerate(self.slots) if run]
            waits += [self.queue[0].created - self.now] if self.queue and self.queue[0].created > self.now else []
            waits += [evaluation[0] - self.now for evaluation in self.evaluations]
            dt = max(min(waits), 0.0)
            self.now += dt
            for i, run in enumerate(self.slots):
                if run is None:
                    continue
                if i in rates:
                    self.reads[run.kind] += rates[i] * dt * run.segments[0].read
                run.left -= rates[i] * dt if i in rates else dt
                if run.left <= 1e-9:
                    run.segments.pop(0)
                    if run.segments:
                        self._begin_segment(run)
                    else:
                        run.ended, self.slots[i] = self.now, None
                        ended += 1
            for evaluation in self.evaluations:
                if evaluation[0] <= self.now + 1e-9:
                    evaluation[0] += evaluation[1]
                    self._evaluate(*evaluation[2:])
        return self._outcome()

    def _outcome(self) -> Outcome:
        signing = [r for r in self.runs if r.kind == SIGNING]
        decisions = [r for r in self.runs if r.kind == DECISIONS]
        signing_ended = max(r.ended for r in signing)
        first, last = min(signing, key=lambda r: r.rank), max(decisions, key=lambda r: r.rank)
        later = self.reads[DECISIONS] + self.reads[SCORING]
        return Outcome(
            cluster=self.cluster, wall=self.now, signing_ended=signing_ended,
            last_decisions_created=max(r.created for r in decisions),
            last_decisions_ended=max(r.ended for r in decisions),
            first_signing_run=first.ended - first.taken, last_decisions_run=last.ended - last.taken,
            cpu_hours=self.model.cpu_hours(),
            signing_read_rate=self.reads[SIGNING] / signing_ended,
            later_read_rate=later / (self.now - signing_ended) if self.now > signing_ended else 0.0,
        )


def decidable(signed: set[int]) -> set[int]:
    """The dumps (by crawl rank) whose decisions may run: each signed, and every earlier dump too."""
    in_order = 0
    while in_order in signed:
        in_order += 1
    return set(range(in_order))


def max_min_fair(demand: dict, capacity: float) -> dict:
    """Each claimant's share of `capacity`: no more than it asks, what is left split evenly among
    those asking more (water-filling)."""
    granted, left = {}, capacity
    for count, (key, asked) in enumerate(sorted(demand.items(), key=lambda item: item[1])):
        granted[key] = min(asked, left / (len(demand) - count))
        left -= granted[key]
    return granted


# --- the command ------------------------------------------------------------------------------

TABLE_HEADER = (
    "| hosts × cores | runs per host × cores | step scaling | read GB/s | a signing run, s | signing ends, min "
    "| last decisions created, min | last decisions run, s | decisions end, min | wall, min | cores busy "
    "| read while signing, GB/s | after, GB/s |\n"
    "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
)


def outcome_row(outcome: Outcome, ideal: bool) -> str:
    c = outcome.cluster
    rate = "∞" if math.isinf(c.read_rate) else f"{c.read_rate / GB:g}"
    cells = [
        c.label, f"{c.runs_per_host} × {c.run_cores}", "ideal" if ideal else "Amdahl", rate,
        f"{outcome.first_signing_run:.0f}", f"{outcome.signing_ended / 60:.1f}",
        f"{outcome.last_decisions_created / 60:.1f}", f"{outcome.last_decisions_run:.0f}",
        f"{outcome.last_decisions_ended / 60:.1f}", f"**{outcome.wall / 60:.1f}**", f"{outcome.busy_share:.0%}",
        f"{outcome.signing_read_rate / GB:.1f}", f"{outcome.later_read_rate / GB:.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


def table(model: Model, clusters: Sequence[Cluster]) -> str:
    return "\n".join([TABLE_HEADER, *(outcome_row(simulate(model, cluster), model.ideal) for cluster in clusters)])


def parse_cluster(text: str) -> tuple[int, int]:
    """`16x16` -> (16 hosts, 16 cores each)."""
    hosts, _, cores = text.lower().partition("x")
    if not (hosts.isdigit() and cores.isdigit() and int(hosts) and int(cores)):
        raise argparse.ArgumentTypeError(f"{text!r}: give hosts x cores, e.g. 16x16")
    return int(hosts), int(cores)


def with_cpu(stages: tuple[Stage, ...], overrides: Sequence[str]) -> tuple[Stage, ...]:
    """The stages with the CPU seconds of `STAGE=SECONDS` overrides."""
    names = [s.name for s in stages]
    cpu = {}
    for item in overrides:
        name, _, value = item.partition("=")
        if name not in names:
            raise SystemExit(f"--stage-cpu {item}: no stage {name!r} (the stages: {', '.join(names)})")
        cpu[name] = float(value)
    return tuple(replace(s, cpu_seconds=cpu.get(s.name, s.cpu_seconds)) for s in stages)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.corpus_model", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", nargs="+", type=parse_cluster, default=[(16, 16), (64, 16), (1, 2)],
                        metavar="HxC", help="hosts × cores each (default: 16x16 64x16 1x2)")
    parser.add_argument("--runs-per-host", nargs="+", type=int, default=[1, 4],
                        help="workers per host, each on its share of the cores (default: 1 4)")
    parser.add_argument("--read-gbps", nargs="+", type=float, default=[math.inf],
                        help="the shared storage's read rate in GB/s, all hosts together (default: inf)")
    parser.add_argument("--overheads", type=Path, help="a bench/celery_arrivals.py result to take the overheads from")
    parser.add_argument("--automation-interval", type=float, default=DEFAULT_AUTOMATION_INTERVAL_SECONDS,
                        help=f"seconds (default {DEFAULT_AUTOMATION_INTERVAL_SECONDS}, the deployment's)")
    parser.add_argument("--no-scoring", action="store_true", help="no scoring run (no recipe reweights)")
    parser.add_argument("--scaling", choices=("ideal", "amdahl", "both"), default="both",
                        help="a step on its cores: every core busy (ideal), Amdahl's law with the stages' serial "
                             "shares, or both tables (default)")
    parser.add_argument("--stage-cpu", nargs="+", default=[], metavar="STAGE=CPU_S",
                        help="a stage's CPU seconds on the measured dump, replacing the table's")
    parser.add_argument("--measured", nargs=2, type=float, metavar=("SOURCE_DOCS", "KEPT_DOCS"),
                        help="the measured dump's source and kept documents (with --stage-cpu)")
    args = parser.parse_args(argv)
    model = Model(stages=with_cpu(STAGES, args.stage_cpu),
                  measured=Measured(*args.measured) if args.measured else MEASURED,
                  overheads=Overheads.read(args.overheads) if args.overheads else MEASURED_OVERHEADS,
                  automation_interval=args.automation_interval, scoring=not args.no_scoring)
    print(f"{model.corpus.dumps} dumps; overheads: {model.overheads}\n")
    print("| step | CPU-hours | TB read from the shared storage |\n|---|--:|--:|")
    for stage, (cpu, read) in model.stage_totals().items():
        print(f"| {stage} | {cpu:.1f} | {read / 1e12:.2f} |")
    print(f"| **all** | **{model.cpu_hours():.1f}** | **{model.read_bytes() / 1e12:.1f}** |")
    clusters = [Cluster(hosts, cores, runs, rate * GB) for hosts, cores in args.hosts
                for runs in args.runs_per_host if runs <= cores for rate in args.read_gbps]
    for ideal in {"ideal": (True,), "amdahl": (False,), "both": (True, False)}[args.scaling]:
        print()
        print(table(replace(model, ideal=ideal), clusters))


if __name__ == "__main__":
    main()
