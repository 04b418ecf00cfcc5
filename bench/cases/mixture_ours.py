"""fw_assets builds a recipe's Megatron cache: plan (reads every .idx) then every index.

    python -m bench.cases.mixture_ours OUTPUT_ROOT RECIPE CACHE_DIR DUMP... [--workers N]
"""

import time

from bench.cases import mixture_case_parser, report
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import write_stage_cache
from fw_assets.mixtures.plan import plan_mixture
from fw_assets.mixtures.recipe import load_recipe


def main() -> None:
    parser = mixture_case_parser()
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    stage = plan_mixture(load_recipe(args.recipe), args.output_root, args.dumps).stages[0]
    planned = time.perf_counter()
    written = write_stage_cache(stage, args.cache_dir, workers=args.workers)
    built = time.perf_counter()
    report(plan_seconds=planned - started, build_seconds=built - planned, files=len(written),
           prefixes=len(stage.members), samples=list(stage.num_samples))


if __name__ == "__main__":
    main()
