"""Our dedup against datatrove's four MinHash stages on the same rows, and ours alone at scale.

    python -m bench.dedup_scale --source ROOT --dump DUMP [--subset 20000] [--workers 2]
        [--datatrove defaults|same-ngrams] [--work DIR]

ROOT/data/DUMP/*.parquet are the rows (a generated dump: id, text, score, as bucketed keeps them;
taken whole as one bucket). On the first `--subset` rows (0: all of them), datatrove
(MinhashDedupSignature, Buckets, Cluster, Filter; 2 reader tasks, `--workers` processes) and
fw_assets (minhash file, then the dump's decisions, `--workers` threads) both run; with a subset,
fw_assets also runs on all rows. datatrove runs with its defaults (spaCy words, 14 x 8: ~70
documents per CPU-second) or with fw_assets' n-grams and bands (`same-ngrams`: whitespace words,
checked on the first rows to equal ours, 16 x 7).

Every stage and every run of ours is a child process, measured once it is waited for: CPU seconds
are its RUSAGE_CHILDREN, which count datatrove's pool workers because they are forked from it and
joined (datatrove's default forkserver makes them children of the forkserver, never reaped by us);
the workers also report their own CPU at the end of each task, as a check. CPU seconds are the
measure: wall seconds depend on the machine's other load (run it under `nice`).
Prints markdown tables: per case wall and CPU seconds, documents per CPU-second, the largest
process's peak RSS, drops; then how the dropped ids overlap.
"""

import argparse
import multiprocessing
import os
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.base import PipelineStep

from bench.datatrove_minhash import datatrove_pipelines, kept_ids, texts_whose_words_differ
from fw_assets.dedup.decide import decide_dump
from fw_assets.dedup.minhash_policy import MINHASH_POLICY
from fw_assets.dedup.signature_files import write_minhash_file
from fw_assets.paths import source_dump_dir

WORD_CHECK_ROWS = 500
STAGES = ("signature", "buckets", "cluster", "filter")
HEADER = """
| case | documents | wall s | CPU s | documents per CPU-second | peak RSS GiB | dropped |
|---|--:|--:|--:|--:|--:|--:|"""


def cpu_of(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Measured:
    wall: float
    cpu: float  # the child's and every descendant's it waited for
    peak_rss_gib: float  # of the largest of those processes
    value: object  # what the function returned in the child


def in_child(function: Callable, *args) -> Measured:
    """`function(*args)` in a forked process, measured once that process is waited for."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def run():
        value = function(*args)
        peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        send.send((value, peak))

    began, cpu = time.perf_counter(), cpu_of(resource.RUSAGE_CHILDREN)
    process = context.Process(target=run)
    process.start()
    send.close()
    value, peak_kib = receive.recv()
    process.join()
    if process.exitcode:
        raise RuntimeError(f"{function.__name__} failed in its child process (exit code {process.exitcode})")
    return Measured(time.perf_counter() - began, cpu_of(resource.RUSAGE_CHILDREN) - cpu, peak_kib / 2**20, value)


class ProcessCpu(PipelineStep):
    """Last step of a datatrove task: writes its process's CPU seconds so far to `folder`."""

    name = "process CPU"

    def __init__(self, folder: Path):
        super().__init__()
        self.folder = folder

    def run(self, data, rank: int = 0, world_size: int = 1):
        if data:
            yield from data
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"{os.getpid()}-{rank}").write_text(str(cpu_of(resource.RUSAGE_SELF)))


def workers_cpu(folder: Path, stage_pid: int) -> float:
    """CPU seconds the pool workers reported (each worker's last report; not the stage process's)."""
    latest: dict[int, float] = {}
    for report in folder.iterdir():
        pid = int(report.name.split("-")[0])
        latest[pid] = max(latest.get(pid, 0.0), float(report.read_text()))
    return sum(cpu for pid, cpu in latest.items() if pid != stage_pid)


def datatrove_stage(pipeline: list, tasks: int, workers: int, logs: Path, reports: Path) -> tuple[int, float]:
    """One stage, its workers forked from this process; returns this process's id and CPU."""
    LocalPipelineExecutor(
        [*pipeline, ProcessCpu(reports)], tasks=tasks, workers=min(workers, tasks),
        logging_dir=str(logs), start_method="fork",
    ).run()
    return os.getpid(), cpu_of(resource.RUSAGE_SELF)


def datatrove(data: Path, work: Path, workers: int, same_ngrams: bool) -> list[tuple[Measured, float]]:
    """Each stage measured, with the CPU its stage process and workers reported themselves."""
    measured = []
    for i, (pipeline, tasks) in enumerate(datatrove_pipelines(data, work, 2, same_ngrams)):
        stage = in_child(datatrove_stage, pipeline, tasks, workers, work / f"logs{i}", work / f"cpu{i}")
        pid, own_cpu = stage.value
        measured.append((stage, own_cpu + workers_cpu(work / f"cpu{i}", pid)))
    return measured


def ours(files: list[Path], dump: str, work: Path, threads: int) -> dict:
    """fw_assets' two steps on `files`: wall and CPU seconds of each (this process, all its
    threads), the documents and the dropped ids."""
    work.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:", config={"threads": threads})
    began, cpu = time.perf_counter(), cpu_of(resource.RUSAGE_SELF)
    sources = [("all", path) for path in files]
    summary = write_minhash_file(con, sources, work / f"{dump}.parquet", dump, MINHASH_POLICY, threads)
    signed, signed_cpu = time.perf_counter(), cpu_of(resource.RUSAGE_SELF)
    decide_dump(con, dump, work / f"{dump}.parquet", [], work / "decisions.parquet", MINHASH_POLICY)
    whole = (time.perf_counter() - began, cpu_of(resource.RUSAGE_SELF) - cpu)
    decisions = pq.read_table(work / "decisions.parquet", columns=["id", "keep", "duplicate_of"])
    dropped = decisions.filter(pa.compute.invert(decisions["keep"])).to_pydict()
    return {
        "documents": summary.documents, "minhash": (signed - began, signed_cpu - cpu), "whole": whole,
        "dropped": dict(zip(dropped["id"], dropped["duplicate_of"])),
    }


def subset_of(files: list[Path], rows: int, dump: str, root: Path) -> list[Path]:
    """The first `rows` rows of `files`, as a two-file dump under `root/data/dump/`."""
    tables, taken = [], 0
    for path in files:
        table = pq.read_table(path, columns=["id", "text", "score"]).slice(0, rows - taken)
        tables.append(table)
        taken += table.num_rows
        if taken >= rows:
            break
    rows_table = pa.concat_tables(tables)
    folder = root / "data" / dump
    folder.mkdir(parents=True)
    half = rows_table.num_rows // 2
    paths = [folder / "train-00000-of-00002.parquet", folder / "train-00001-of-00002.parquet"]
    pq.write_table(rows_table.slice(0, half), paths[0])
    pq.write_table(rows_table.slice(half), paths[1])
    return paths


def words_agree(files: list[Path]) -> str:
    texts = pq.ParquetFile(files[0]).read_row_group(0, columns=["text"])["text"].to_pylist()[:WORD_CHECK_ROWS]
    differ = texts_whose_words_differ(texts)
    return f"datatrove's words equal ours in {len(texts) - len(differ)} of the first {len(texts)} documents"


def row(name: str, documents: int, wall: float, cpu: float, rss: float | None = None, dropped="") -> str:
    rss_cell = "" if rss is None else f"{rss:.2f}"
    return f"| {name} | {documents:,} | {wall:,.1f} | {cpu:,.1f} | {documents / cpu:,.0f} | {rss_cell} | {dropped} |"


def print_ours(name: str, run: Measured) -> None:
    result = run.value
    print(row(f"fw_assets `minhash` ({name})", result["documents"], *result["minhash"]))
    print(row(f"fw_assets `minhash` + decisions ({name})", result["documents"], *result["whole"],
              run.peak_rss_gib, f"{len(result['dropped']):,}"))


def overlap(ours_dropped: dict[str, str], theirs: set[str]) -> str:
    """How the dropped ids compare. Both keep one document per cluster, not always the same one
    (datatrove its union-find root, ours the best score), so a drop of one side that the other
    keeps is a disagreement only if the other also keeps the document it duplicates."""
    both = ours_dropped.keys() & theirs
    pairs_theirs_keep = sum(1 for doc, kept in ours_dropped.items() if doc not in theirs and kept not in theirs)
    theirs_ours_keep = theirs - ours_dropped.keys() - set(ours_dropped.values())
    return (
        f"dropped by both: {len(both):,}; by fw_assets only: {len(ours_dropped) - len(both):,}"
        f" (of them, with the document they duplicate also kept by datatrove: {pairs_theirs_keep:,});"
        f" by datatrove only: {len(theirs) - len(both):,} (of them, in no duplicate pair of"
        f" fw_assets: {len(theirs_ours_keep):,})"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dedup_scale")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--dump", required=True)
    parser.add_argument("--subset", type=int, default=20_000, help="first rows both run on; 0: all")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--datatrove", choices=("defaults", "same-ngrams"), default="defaults")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)
    files = sorted(source_dump_dir(args.source, args.dump).glob("*.parquet"))
    same_ngrams = args.datatrove == "same-ngrams"
    with tempfile.TemporaryDirectory(dir=args.work) as scratch:
        work = Path(scratch)
        rows = subset_of(files, args.subset, args.dump, work / "subset") if args.subset else files
        if same_ngrams:
            print(words_agree(rows), flush=True)
        documents = sum(pq.ParquetFile(path).metadata.num_rows for path in rows)
        stages = datatrove(rows[0].parent, work / "datatrove", args.workers, same_ngrams)
        theirs = {doc for path in rows for doc in pq.read_table(path, columns=["id"])["id"].to_pylist()}
        theirs -= kept_ids(work / "datatrove")
        small = in_child(ours, rows, args.dump, work / "ours", args.workers)
        print(HEADER)
        for name, (stage, _) in zip(STAGES, stages):
            print(row(f"datatrove {name} stage", documents, stage.wall, stage.cpu, stage.peak_rss_gib))
        print(row("datatrove 4 stages", documents, sum(s.wall for s, _ in stages), sum(s.cpu for s, _ in stages),
                  max(s.peak_rss_gib for s, _ in stages), f"{len(theirs):,}"))
        print_ours("same rows", small)
        reported = ", ".join(f"{name} {own:,.1f}" for name, (_, own) in zip(STAGES, stages))
        print(f"\ndatatrove CPU s as its processes reported it (stage process + workers): {reported}")
        print(overlap(small.value["dropped"], theirs), flush=True)
        if args.subset:
            print(HEADER)
            print_ours("all rows", in_child(ours, files, args.dump, work / "ours-all", args.workers))


if __name__ == "__main__":
    main()
