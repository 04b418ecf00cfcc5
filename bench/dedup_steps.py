"""Time and CPU of the dedup steps on generated dumps: minhash per dump, then decisions in crawl order.

    python -m bench.dedup_steps --root DIR [--rows 50000] [--dumps 4] [--threads 2]

Each dump's rows are signed as one bucket (the steps do not care how bucketed split them), then
dump k is decided against dumps 1..k-1, so the table shows how a decision's cost grows with the
number of earlier dumps.
"""

import argparse
import resource
import time
from pathlib import Path

import duckdb

from fw_assets.dedup.decide import decide_dump
from fw_assets.dedup.minhash_policy import MINHASH_POLICY
from fw_assets.dedup.signature_files import write_minhash_file
from fw_assets.synthetic.generator import write_sample_dump


def timed(function, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dedup_steps")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--dumps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    dumps = [f"CC-MAIN-{2013 + k // 2}-{20 + 28 * (k % 2)}" for k in range(args.dumps)]
    (args.root / "minhash").mkdir(parents=True, exist_ok=True)
    (args.root / "dedup").mkdir(exist_ok=True)
    print("| step | dump | docs | wall s | CPU s | docs per CPU-s | dropped within / against earlier |")
    print("|---|---|--:|--:|--:|--:|---|")
    minhash = {}
    con = duckdb.connect(":memory:", config={"threads": args.threads})
    for dump in dumps:
        sources = [("all", p) for p in write_sample_dump(args.root, dump, args.rows)]
        minhash[dump] = args.root / "minhash" / f"{dump}.parquet"
        summary, wall, cpu = timed(
            write_minhash_file, con, sources, minhash[dump], dump, MINHASH_POLICY, args.threads
        )
        print(
            f"| minhash | {dump} | {summary.documents:,} | {wall:.1f} | {cpu:.1f} |"
            f" {summary.documents / cpu:,.0f} | |"
        )
    for k, dump in enumerate(dumps):
        earlier = [(d, minhash[d]) for d in dumps[:k]]
        out = args.root / "dedup" / f"{dump}.parquet"
        summary, wall, cpu = timed(decide_dump, con, dump, minhash[dump], earlier, out, MINHASH_POLICY)
        print(
            f"| decisions (after {k} dumps) | {dump} | {summary.documents:,} | {wall:.1f} | {cpu:.1f} |"
            f" {summary.documents / cpu:,.0f} |"
            f" {summary.dropped_within_dump} / {summary.dropped_against_earlier} |"
        )
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
