"""CLI: `python -m fw_assets.dedup explain ID [ID ...] [--output DIR]`: why a document was kept
or dropped (its dump, its match and that one's dump, the bands they share, the similarity), one
line per dump whose decision file holds it."""

import argparse
import sys
from pathlib import Path

import duckdb

from fw_assets import settings
from fw_assets.dedup.explain import explain
from fw_assets.formats.lineage import StaleInput, refuse_stale_inputs
from fw_assets.lib.publish import recorded_generation
from fw_assets.paths import minhash_path, publication_name, published_decisions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fw_assets.dedup")
    commands = parser.add_subparsers(dest="command", required=True)
    explaining = commands.add_parser("explain", help="why documents were kept or dropped")
    explaining.add_argument("ids", nargs="+", metavar="ID", help="document id, e.g. '<urn:uuid:…>'")
    explaining.add_argument(
        "--output", type=Path, default=settings.output_dir(),
        help=f"the output root (default: ${settings.OUTPUT_DIR_ENV} or {settings.DEFAULT_OUTPUT_DIR})",
    )
    args = parser.parse_args(argv)
    decisions = published_decisions(args.output)
    if not decisions:
        print(f"No decision files under {settings.described_output_dir(args.output)}: materialize deduplicated first.")
        return 2
    unknown = 0
    with duckdb.connect(":memory:") as con:
        for doc_id in args.ids:
            found = explain(con, doc_id, decisions, lambda dump: minhash_path(args.output, dump))
            if not found:
                unknown += 1
                print(f"{doc_id}: in no decision file of {len(decisions)} dump(s) under {args.output}")
            for why in found:  # an id in several dumps: each dump's decision, in crawl order
                try:  # its bands are read from minhash files that must be the ones it was decided on
                    decided_on = recorded_generation(args.output, publication_name("dedup", why.dump))
                    refuse_stale_inputs(args.output, decided_on)
                except StaleInput as error:
                    print(error, file=sys.stderr)
                    return 2
                print(why.describe())
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main())
