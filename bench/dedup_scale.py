"""Our dedup against datatrove's four MinHash stages on the same rows, and ours alone at scale.

    python -m bench.dedup_scale --source ROOT --dump DUMP [--subset 20000] [--workers 2]

ROOT/data/DUMP/*.parquet are the rows (a generated dump: id, text, score, as bucketed keeps them;
taken whole as one bucket). On the first `--subset` rows, both datatrove (MinhashDedupSignature,
Buckets, Cluster, Filter; its defaults, 2 reader tasks, `--workers` processes) and fw_assets
(minhash file, then the dump's decisions) run, and their dropped-id counts are compared; on all
rows, fw_assets alone (datatrove's signature stage runs ~90 documents per CPU-second: a million
documents would take hours here). Prints one markdown table: wall and CPU seconds (this process
and its children), documents per second, drops.
"""

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from bench.dedup_quality import datatrove_kept_ids
from fw_assets.dedup.decide import decide_dump
from fw_assets.dedup.minhash_file import write_minhash_file
from fw_assets.dedup.policy import MINHASH_POLICY
from fw_assets.layout import source_dump_dir


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def ours(files: list[Path], dump: str, work: Path, threads: int) -> dict:
    """fw_assets' two steps on `files`: seconds of each and the drops."""
    work.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:", config={"threads": threads})
    began, cpu = time.perf_counter(), cpu_seconds()
    sources = [("all", path) for path in files]
    summary = write_minhash_file(con, sources, work / f"{dump}.parquet", dump, MINHASH_POLICY, threads)
    signed, signed_cpu = time.perf_counter(), cpu_seconds()
    decided = decide_dump(con, dump, work / f"{dump}.parquet", [], work / "decisions.parquet", MINHASH_POLICY)
    return {
        "documents": summary.documents,
        "minhash": (signed - began, signed_cpu - cpu),
        "whole": (time.perf_counter() - began, cpu_seconds() - cpu),
        "dropped": decided.dropped_within_dump,
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


def row(name: str, documents: int, wall: float, cpu: float | None, dropped: int | str = "") -> str:
    cpu_cell = "" if cpu is None else f"{cpu:,.1f}"
    return f"| {name} | {documents:,} | {wall:,.1f} | {cpu_cell} | {documents / wall:,.0f} | {dropped} |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dedup_scale")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--dump", required=True)
    parser.add_argument("--subset", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    files = sorted(source_dump_dir(args.source, args.dump).glob("*.parquet"))
    print("| case | documents | wall s | CPU s | documents/s (wall) | dropped |")
    print("|---|--:|--:|--:|--:|--:|")
    with tempfile.TemporaryDirectory(dir=args.source) as scratch:
        work = Path(scratch)
        subset = subset_of(files, args.subset, args.dump, work / "subset")
        began, cpu = time.perf_counter(), cpu_seconds()
        kept, stages = datatrove_kept_ids(work / "subset", work / "datatrove", tasks=2, workers=args.workers)
        wall = time.perf_counter() - began
        print(row("datatrove signature stage", args.subset, stages[0], None))
        print(row("datatrove 4 stages", args.subset, wall, cpu_seconds() - cpu, args.subset - len(kept)))
        small = ours(subset, args.dump, work / "ours-subset", args.workers)
        print(row("fw_assets minhash", small["documents"], *small["minhash"]))
        print(row("fw_assets minhash + decisions", small["documents"], *small["whole"], small["dropped"]))
        shutil.rmtree(work / "datatrove")
        full = ours(files, args.dump, work / "ours-full", args.workers)
        print(row("fw_assets minhash", full["documents"], *full["minhash"]))
        print(row("fw_assets minhash + decisions", full["documents"], *full["whole"], full["dropped"]))
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB (this process)")


if __name__ == "__main__":
    main()
