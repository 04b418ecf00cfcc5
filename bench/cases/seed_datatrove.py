"""The seed's own pipeline: datatrove ParquetReader -> StratifiedSampler -> MultiBucketWriter.

    python -m bench.cases.seed_datatrove --source ROOT --out DIR --logs DIR --dumps D1 D2 --workers 2

One datatrove task per source file, `--workers` at a time. The logging folder must be empty:
datatrove skips tasks it finds completed there.
"""

import argparse
from pathlib import Path

from bench.cases import report
from bench.cases.fw_sql import dump_inputs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cases.seed_datatrove")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--logs", type=Path, required=True)
    parser.add_argument("--dumps", nargs="+", required=True)
    parser.add_argument("--workers", type=int, required=True)
    args = parser.parse_args(argv)

    from bench.seed_pipeline import seed_executor  # datatrove is an optional dependency

    if args.logs.exists() and any(args.logs.iterdir()):
        parser.error(f"{args.logs} is not empty: datatrove would skip the tasks it finished before")
    files = dump_inputs(args.source, args.dumps, "all")["all"]
    seed_executor(files, args.out, args.logs, args.workers).run()
    report(tasks=len(files), workers=args.workers)


if __name__ == "__main__":
    main()
