"""fw_assets' two statements without Dagster: `sampled` then `bucketed`, dump after dump.

    python -m bench.cases.fw_sql --source ROOT --out DIR --dumps D1 D2 [--step sampled|bucketed]
        [--as NAME] [--memory-limit 6GiB|none]

`--as NAME` reads every given dump's files as one dump called NAME (the memory case's 4N dump).
Connections come from `Warehouse` with its defaults, as the assets get them.
"""

import argparse
import sys
from pathlib import Path

from bench.cases import report
from fw_assets.bucketing.sample_and_bucket import write_buckets, write_selection
from fw_assets.formats.manifest import source_files
from fw_assets.lib.progress import ProgressReporter
from fw_assets.paths import selection_path, source_dump_dir
from fw_assets.resources import Warehouse
from fw_assets.sampling_policy import SEED_POLICY


def dump_inputs(source: Path, dumps: list[str], merged_name: str | None) -> dict[str, list[str]]:
    files = {dump: [str(p) for p in source_files(source_dump_dir(source, dump))] for dump in dumps}
    if merged_name:
        return {merged_name: [f for dump in dumps for f in files[dump]]}
    return files


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cases.fw_sql")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dumps", nargs="+", required=True)
    parser.add_argument("--as", dest="merged_name")
    parser.add_argument("--step", choices=["both", "sampled", "bucketed"], default="both")
    parser.add_argument("--memory-limit", default="", help="empty: the resource's default")
    args = parser.parse_args(argv)

    resource = Warehouse(memory_limit=args.memory_limit)
    log = lambda message: print(message, file=sys.stderr)  # noqa: E731
    for dump, files in dump_inputs(args.source, args.dumps, args.merged_name).items():
        selection = selection_path(args.out, dump)
        selection.parent.mkdir(parents=True, exist_ok=True)
        (args.out / "buckets").mkdir(exist_ok=True)
        with resource.connect(args.out / ".spill") as con:
            if args.step in ("both", "sampled"):
                write_selection(con, files, selection, SEED_POLICY, ProgressReporter(log, f"sampling {dump}", 0))
            if args.step in ("both", "bucketed"):
                progress = ProgressReporter(log, f"bucketing {dump}", 0)
                write_buckets(con, files, selection, args.out / "buckets" / dump, progress)
    report(step=args.step, memory_limit=args.memory_limit or "default")


if __name__ == "__main__":
    main()
