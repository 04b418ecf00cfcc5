"""CLI: `python -m fw_assets.synthetic ROOT [--dumps ...] [--rows N] [--files N] [--seed N]`."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from fw_assets.synthetic.generator import (
    DEFAULT_DUMPS,
    DEFAULT_DUP_SHARE,
    DEFAULT_MEDIAN_WORDS,
    DEFAULT_ROWS,
    DEFAULT_TWIN_SHARE,
    DEFAULT_WORDS_SIGMA,
    FINEWEB_EDU_MEDIAN_WORDS,
    FINEWEB_EDU_WORDS_SIGMA,
    write_sample_dump,
)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and write the sample dumps, printing each file as it lands."""
    parser = argparse.ArgumentParser(
        prog="python -m fw_assets.synthetic",
        description="Write FineWeb-Edu-shaped sample dumps to ROOT/data/<dump>/train-*.parquet.",
    )
    parser.add_argument("root", type=Path, help="snapshot root (e.g. the FW_SOURCE_DIR)")
    parser.add_argument("--dumps", nargs="+", default=list(DEFAULT_DUMPS), metavar="DUMP")
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS, help="rows per dump")
    parser.add_argument("--files", type=int, default=1, help="parquet files per dump")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--dup-share", type=float, default=DEFAULT_DUP_SHARE,
        help="share of rows that are near-duplicates across dumps",
    )
    parser.add_argument(
        "--twin-share", type=float, default=DEFAULT_TWIN_SHARE,
        help="share of rows that are near-duplicate twins within each dump",
    )
    parser.add_argument(
        "--paragraph-share", type=float, default=0.0,
        help="share of rows made short pages sharing a boilerplate paragraph",
    )
    parser.add_argument(
        "--probe-plant-share", type=float, default=0.0,
        help="share of rows made top-bucket gibberish pages, and as many contract pages (probe demo)",
    )
    parser.add_argument(
        "--median-words", type=int, default=DEFAULT_MEDIAN_WORDS,
        help=f"median words of a text (default {DEFAULT_MEDIAN_WORDS}); lower shortens every text alike; "
        f"FineWeb-Edu's length is {FINEWEB_EDU_MEDIAN_WORDS} with --words-sigma {FINEWEB_EDU_WORDS_SIGMA}",
    )
    parser.add_argument(
        "--words-sigma", type=float, default=DEFAULT_WORDS_SIGMA,
        help=f"sigma of the lognormal text length (default {DEFAULT_WORDS_SIGMA}); lower thins the long tail",
    )
    args = parser.parse_args(argv)
    for dump in args.dumps:
        began = time.perf_counter()
        try:
            paths = write_sample_dump(
                args.root, dump, args.rows, args.files, args.seed, args.dup_share,
                twin_share=args.twin_share, paragraph_share=args.paragraph_share,
                probe_plant_share=args.probe_plant_share, median_words=args.median_words,
                words_sigma=args.words_sigma,
            )
        except ValueError as error:
            parser.error(str(error))
        seconds = time.perf_counter() - began
        print(f"{dump}: {args.rows} rows in {len(paths)} file(s), {seconds:.1f} s")
        for path in paths:
            print(f"  {path}")


if __name__ == "__main__":
    main()
