"""`python -m fw_assets.mixtures explain <recipe> --stage <name> --split train --sample N`: the
documents and token ranges of one training sample, read from the published plan and cache under
$FW_OUTPUT_DIR (materialize `mixture_plan*` for the recipe first)."""

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from fw_assets import settings
from fw_assets.formats.lineage import RefusedInput, checked_generation
from fw_assets.mixtures.explain import explain_sample
from fw_assets.mixtures.megatron.utils import SPLITS
from fw_assets.mixtures.published import read_plan, stage_from_plan_json, stage_names
from fw_assets.paths import mixture_cache_dir, publication_name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fw_assets.mixtures", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    explain = commands.add_parser("explain", help="which documents make up training sample N")
    explain.add_argument("recipe")
    explain.add_argument("--stage", help="the stage (default: the plan's only stage)")
    explain.add_argument("--split", choices=SPLITS, default="train")
    explain.add_argument("--sample", type=int, required=True, help="the sample's index in the blend")
    args = parser.parse_args(argv)

    root = settings.output_dir()
    indexes = publication_name("megatron_indexes", args.recipe)
    with _stale_refused(parser), checked_generation(root, indexes, args.recipe) as record:
        if record is None:
            parser.exit(2, f"recipe {args.recipe}: no indexes under {settings.described_output_dir(root)}; "
                           f"materialize them with `dagster asset materialize -m fw_assets.definitions "
                           f"--select 'mixture_plan*' "
                           f"--partition {args.recipe}`\n")
        plan = read_plan(root, args.recipe)
        stages = stage_names(plan)
        if args.stage is None and len(stages) > 1:
            parser.exit(2, f"recipe {args.recipe} has stages {stages}: pass --stage\n")
        try:
            stage = stage_from_plan_json(plan, args.stage or stages[0])
            explained = explain_sample(stage, mixture_cache_dir(root, args.recipe), args.split, args.sample)
        except (KeyError, IndexError) as error:
            parser.exit(2, f"{error.args[0]}\n")
    json.dump(explained, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


@contextmanager
def _stale_refused(parser: argparse.ArgumentParser) -> Iterator[None]:
    """Indexes built from a plan or token files replaced since would explain other documents; a
    record or file that cannot be trusted, whatever."""
    try:
        yield
    except RefusedInput as error:
        parser.exit(2, f"{error}\n")


if __name__ == "__main__":
    sys.exit(main())
