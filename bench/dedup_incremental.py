"""How deciding a dump costs as earlier dumps accumulate, at equal dump size: the 1st, 2nd, 5th and
8th dump (0, 1, 4 and 7 earlier dumps) decided in a fresh process each (median of `--runs`), two
ways:

- `decide`: the bare decision step (fw_assets.dedup.decide.decide_dump) on the published minhash
  files, after loading numba's compiled key matching (timed apart: a run of the whole chain has
  loaded numba in its `minhash` step already);
- `asset`: the `deduplicated` asset materialized through Dagster, as a user sees it: its decisions,
  checks and metadata, with numba loaded as in a run of the chain. Three figures: the process's
  CPU seconds over the whole `dg.materialize` ("run"), the CPU seconds of the step body alone
  (its `cpu_seconds` metadata: the run less Dagster's own ~0.25–0.3 CPU s around it), and the
  step's wall seconds from STEP_START to STEP_SUCCESS.

    python -m bench.dedup_incremental --root DIR [--rows 100000] [--dumps 8] [--runs 3]

The first call generates `--dumps` sample dumps of `--rows` rows under DIR/source (about 35 % of
them reach `bucketed`: `--rows 400000` gives ~139,000 decided documents a dump) and materializes
raw, sampled, bucketed and minhash of each into DIR/output (~1.5 minutes and ~1.6 GB of disk per
dump at 400,000 rows, most of it the generated source); later calls reuse them. Each table row
reports the mode's CPU and wall seconds, their ratios to the 1st dump's and the process's peak RSS.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from fw_assets.partitions import known_dumps

MODES = ("decide", "asset")


def dumps_of(count: int) -> list[str]:
    return known_dumps()[:count]


def resources(root: Path) -> dict:
    from fw_assets.resources import FineWebStorage, Warehouse

    return {
        "storage": FineWebStorage(source_dir=str(root / "source"), output_dir=str(root / "output")),
        "warehouse": Warehouse(threads=2, memory_limit="4GiB"),
    }


def prepare(root: Path, rows: int, count: int) -> None:
    """Generated dumps and their chain up to `minhash`, unless a previous call made them."""
    import dagster as dg

    from fw_assets.bucketing.bucketed import bucketed
    from fw_assets.bucketing.raw import raw
    from fw_assets.bucketing.sampled import sampled
    from fw_assets.dedup.minhash import minhash
    from fw_assets.paths import minhash_path
    from fw_assets.synthetic.generator import write_sample_dump

    for dump in dumps_of(count):
        if minhash_path(root / "output", dump).exists():
            continue
        print(f"preparing {dump}: {rows:,} generated documents, raw to minhash", file=sys.stderr)
        write_sample_dump(root / "source", dump, rows)
        dg.materialize([raw, sampled, bucketed, minhash], partition_key=dump, resources=resources(root))


def load_like_the_chain() -> float:
    """Load what a run of the chain has loaded before `deduplicated` (its `minhash` step loads
    numba with its kernels from numba's cache, and pandas through pyarrow's conversion of numpy
    arrays); returns the CPU seconds of the key-matching kernels' load alone."""
    import pandas  # noqa: F401

    from fw_assets.dedup.shingling import Shingles
    from fw_assets.dedup.signing import signatures_of

    signatures_of(Shingles(np.zeros(1, np.uint64), np.zeros(2, np.int64)), np.ones(1, np.uint64), np.ones(1, np.uint64))
    return cold_numba_load()


def cold_numba_load() -> float:
    """CPU seconds to load the key-matching kernels from numba's cache, and numba with them if
    nothing loaded it before (main's cold measure: a re-run of `deduplicated` alone, e.g. by
    `stale_dedup`)."""
    cpu = time.process_time()
    import pyarrow as pa

    from fw_assets.dedup.sorted_keys import SORTED_KEYS_SCHEMA, key_index, matching_rows

    one_key = pa.table({"key": [1], "row": [0]}, schema=SORTED_KEYS_SCHEMA)
    matching_rows(key_index(np.zeros(0, np.uint64), np.zeros(0, np.uint32)), one_key.to_batches())
    return time.process_time() - cpu


def decide_once(root: Path, k: int, count: int, against: int | None = None) -> dict:
    """Dump `k`'s bare decisions against its first `against` earlier dumps (all `k` if None)."""
    import duckdb

    from fw_assets.dedup.decide import decide_dump
    from fw_assets.dedup.minhash_policy import MINHASH_POLICY
    from fw_assets.paths import minhash_path

    dumps = dumps_of(count)
    files = {d: minhash_path(root / "output", d) for d in dumps}
    con = duckdb.connect(":memory:", config={"threads": 2})
    numba_cpu = load_like_the_chain()
    wall, cpu = time.perf_counter(), time.process_time()
    out = root / "decide" / f"{dumps[k]}.parquet"
    out.parent.mkdir(exist_ok=True)
    summary = decide_dump(
        con, dumps[k], files[dumps[k]], [(d, files[d]) for d in dumps[:k][:against]], out, MINHASH_POLICY, threads=2
    )
    return {
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "numba_cpu": numba_cpu,
        "documents": summary.documents,
        "dropped": summary.dropped_within_dump + summary.dropped_against_earlier,
    }


def asset_once(root: Path, k: int, count: int) -> dict:
    import dagster as dg

    from fw_assets.dedup.deduplicated import deduplicated

    dump = dumps_of(count)[k]
    numba_cpu = load_like_the_chain()
    with dg.instance_for_test() as instance:
        cpu = time.process_time()
        result = dg.materialize(
            [deduplicated], partition_key=dump, resources=resources(root), instance=instance
        )
        cpu = time.process_time() - cpu
    (success,) = result.get_step_success_events()
    (materialization,) = result.asset_materializations_for_node(deduplicated.op.name)
    metadata = {key: value.value for key, value in materialization.metadata.items()}
    return {
        "wall": success.event_specific_data.duration_ms / 1000,
        "cpu": cpu,
        "step_cpu": metadata["cpu_seconds"],
        "numba_cpu": numba_cpu,
        "documents": metadata["documents"],
        "dropped": metadata["dropped_within_dump"] + metadata["dropped_against_earlier"],
    }


def child(root: Path, mode: str, k: int, count: int, against: int | None = None) -> dict:
    figures = decide_once(root, k, count, against) if mode == "decide" else asset_once(root, k, count)
    return figures | {"peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def run_child(args: argparse.Namespace, *child_args: str) -> dict:
    command = [
        sys.executable, "-m", "bench.dedup_incremental", "--root", str(args.root),
        "--dumps", str(args.dumps), *child_args,
    ]
    # A fresh process sees the generated dumps as partitions (they are known dumps anyway).
    env = os.environ | {"FW_SOURCE_DIR": str(args.root / "source")}
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    return json.loads(done.stdout.splitlines()[-1])


COLUMNS = {  # mode -> (figure, heading) of the timed columns, each also reported against the 1st dump
    "decide": (("cpu", "CPU s"), ("wall", "wall s")),
    "asset": (("cpu", "run CPU s"), ("step_cpu", "step CPU s"), ("wall", "step wall s")),
}


def report(args: argparse.Namespace, mode: str) -> None:
    columns = COLUMNS[mode]
    print(f"\n`{mode}`, median of {args.runs} fresh processes (load average {os.getloadavg()[0]:.1f} at start)\n")
    headings = [h for _, h in columns] + [f"{h.removesuffix(' s')} / 1st" for _, h in columns]
    print("| dump | earlier dumps | documents | dropped | " + " | ".join(headings) + " | peak RSS GiB |")
    print("|--:" * (5 + 2 * len(columns)) + "|")
    first = None
    for k in (0, 1, 4, 7):
        if k >= args.dumps:
            break
        runs = [run_child(args, "--mode", mode, "--child", str(k)) for _ in range(args.runs)]
        figures = [statistics.median(r[key] for r in runs) for key, _ in columns]
        first = first or figures
        r = runs[0]
        cells = [f"{x:.2f}" for x in figures] + [f"{x / f:.2f}" for x, f in zip(figures, first)]
        print(
            f"| {k + 1} | {k} | {r['documents']:,} | {r['dropped']:,} | {' | '.join(cells)} |"
            f" {max(r['peak_rss_gib'] for r in runs):.2f} |",
            flush=True,
        )
    numba = statistics.median(r["numba_cpu"] for r in runs)
    print(f"\nLoading the key-matching kernels once numba is loaded: {numba:.2f} CPU s (not in the table).")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dedup_incremental")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dumps", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--against", type=int, help=argparse.SUPPRESS)  # decide: the first N earlier dumps only
    parser.add_argument("--cold-numba", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cold_numba:
        print(json.dumps({"numba_cpu": cold_numba_load()}))
    elif args.child is not None:
        print(json.dumps(child(args.root, args.mode, args.child, args.dumps, args.against)))
    else:
        prepare(args.root, args.rows, args.dumps)
        for mode in args.modes:
            report(args, mode)
        cold = statistics.median(run_child(args, "--cold-numba")["numba_cpu"] for _ in range(args.runs))
        print(f"Loading numba and the key-matching kernels in a process that has not loaded numba: {cold:.2f} CPU s.")


if __name__ == "__main__":
    main()
