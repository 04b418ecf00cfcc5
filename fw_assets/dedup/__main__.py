"""CLI: `python -m fw_assets.dedup explain ID [ID ...] [--output DIR]`: why a document was kept
or dropped (its dump, its match and that one's dump, the bands they share, the similarity), one
line per dump whose decision file holds it."""

import argparse
import sys
from pathlib import Path

import duckdb

from fw_assets import settings
from fw_assets.dedup.explain import explain
from fw_assets.formats.lineage import StaleInput, damage_message, refresh_command, refuse_stale_inputs
from fw_assets.lib.generation_record import RecordRefused
from fw_assets.lib.publish import recorded_generation
from fw_assets.paths import decision_files, generation_record_path, minhash_path, publication_name


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
    decisions = decision_files(args.output)
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
                if refusal := _unexplainable(args.output, why.dump, decisions[why.dump]):
                    print(refusal, file=sys.stderr)
                    return 2
                print(why.describe())
    return 1 if unknown else 0


def _unexplainable(output: Path, dump: str, decisions: Path) -> str | None:
    """Why the decisions of `dump` cannot be explained (None if they can): their bands are read
    from the minhash files they were decided on, which only their generation record names."""
    name = publication_name("dedup", dump)
    try:
        record = recorded_generation(output, name)
        if record is not None:
            refuse_stale_inputs(output, record)
    except RecordRefused as error:
        return damage_message(error)
    except StaleInput as error:
        return str(error)
    if record is None:
        return (f"Dump {dump}: {decisions} has no generation record ({generation_record_path(output, name)}) "
                f"under {output}, so the minhash files it was decided on are unknown. Make the decisions "
                f"again: `{refresh_command(name, dump)}`.")
    return None


if __name__ == "__main__":
    sys.exit(main())
