"""CLI: `python -m fw_assets.verify [--partition KEY] [--output DIR]`: re-read every published file
of the output folder ($FW_OUTPUT_DIR), or of one partition (a dump or a recipe), and compare each with
the size and checksum its generation record holds. Names every file that differs and the command
that makes its output again, and exits 1; exits 0 with a count when all match (2: nothing to verify).
"""

import argparse
import sys
from pathlib import Path

from fw_assets import settings
from fw_assets.formats.published_files import verify_publications
from fw_assets.lib.checksums import ALGORITHM


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fw_assets.verify", description=__doc__.splitlines()[0])
    parser.add_argument("--partition", help="only the outputs of this dump or recipe")
    parser.add_argument(
        "--output", type=Path, default=settings.output_dir(),
        help=f"the output root (default: ${settings.OUTPUT_DIR_ENV} or {settings.DEFAULT_OUTPUT_DIR})",
    )
    args = parser.parse_args(argv)
    where = settings.described_output_dir(args.output)
    found = verify_publications(args.output, args.partition)
    of = f" of {args.partition}" if args.partition else ""
    if not found.publications and not found.problems:
        print(f"No published output{of} under {where}: nothing to verify.")
        return 2
    for name, problem in found.problems.items():
        print(f"{name} differs from its generation record:")
        for line in problem.differs:
            print(f"  {line}")
        print(f"  make it again: {problem.command}")
    if found.problems:
        print(f"{len(found.problems)} publication(s){of} differ from their generation records under {where}; "
              f"{found.files:,} files of {found.publications} publication(s) match.")
        return 1
    print(f"All {found.files:,} files of {found.publications} publication(s){of} under {where} match their "
          f"generation records (size and {ALGORITHM}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
