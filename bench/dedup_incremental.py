"""How a dump's decisions cost as earlier dumps accumulate: the 1st, 2nd, 5th and 8th dump decided
(0, 1, 4 and 7 earlier dumps), each in a fresh process (best of `--runs`), with its CPU seconds,
wall seconds and peak RSS. The once-per-process load of numba's compiled merge is timed apart.

    python -m bench.dedup_steps --root DIR --rows 50000 --dumps 8     # the minhash files
    python -m bench.dedup_incremental --root DIR [--runs 3] [--threads 2]

The decisions of dump k read the minhash files of dumps 1..k-1; every dump has the same size.
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np

from fw_assets.dedup.decide import decide_dump
from fw_assets.dedup.policy import MINHASH_POLICY
from fw_assets.dedup.sorted_keys import matching_rows


def minhash_files(root: Path) -> dict[str, Path]:
    return {p.stem: p for p in sorted((root / "minhash").glob("*.parquet")) if not p.stem.endswith(".keys")}


def warm_up() -> float:
    """Load what every run loads once whatever the number of earlier dumps (numba's compiled merge
    from its cache); returns its CPU seconds."""
    cpu = time.process_time()
    empty = np.zeros(0, np.uint64), np.zeros(0, np.uint32)
    matching_rows(empty, empty)
    return time.process_time() - cpu


def decide_once(root: Path, k: int, threads: int) -> dict:
    files = minhash_files(root)
    dumps = sorted(files)
    con = duckdb.connect(":memory:", config={"threads": threads})
    once = warm_up()
    wall, cpu = time.perf_counter(), time.process_time()
    summary = decide_dump(
        con, dumps[k], files[dumps[k]], [(d, files[d]) for d in dumps[:k]],
        root / "dedup" / f"{dumps[k]}.parquet", MINHASH_POLICY,
    )
    return {
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "warm_up_cpu": once,
        "documents": summary.documents,
        "dropped": summary.dropped_within_dump + summary.dropped_against_earlier,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dedup_incremental")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(decide_once(args.root, args.child, args.threads)))
        return
    (args.root / "dedup").mkdir(exist_ok=True)
    print(
        "| dump | earlier dumps read | documents | dropped | CPU s | wall s | peak RSS GiB | CPU / 1st"
        " | numba load CPU s |"
    )
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    first = None
    for k in (0, 1, 4, 7):
        runs = [
            json.loads(subprocess.run(
                [sys.executable, "-m", "bench.dedup_incremental", "--root", str(args.root),
                 "--threads", str(args.threads), "--child", str(k)],
                check=True, capture_output=True, text=True,
            ).stdout)
            for _ in range(args.runs)
        ]
        best = min(runs, key=lambda r: r["cpu"])
        first = first or best["cpu"]
        print(
            f"| {k + 1} | {k} | {best['documents']:,} | {best['dropped']:,} | {best['cpu']:.2f} |"
            f" {min(r['wall'] for r in runs):.2f} | {max(r['peak_rss_gib'] for r in runs):.2f} |"
            f" {best['cpu'] / first:.2f} | {best['warm_up_cpu']:.2f} |"
        )


if __name__ == "__main__":
    main()
