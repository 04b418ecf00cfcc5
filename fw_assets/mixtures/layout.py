"""Where a recipe's outputs live: `<output_root>/mixtures/<recipe>/{plan.json,report.md,
<stage>.data-args.txt,cache/}`."""

from pathlib import Path

RECIPE_GLOB = "*.yaml"


def shipped_recipes_dir() -> Path:
    """The example recipes that ship with fw_assets (beside this module)."""
    return Path(__file__).parent


def mixture_dir(output_root: Path, recipe: str) -> Path:
    return output_root / "mixtures" / recipe


def plan_path(output_root: Path, recipe: str) -> Path:
    return mixture_dir(output_root, recipe) / "plan.json"


def data_args_name(stage: str) -> str:
    """File name of a stage's `--data-args-path` file."""
    return f"{stage}.data-args.txt"


def cache_dir(output_root: Path, recipe: str) -> Path:
    """`--data-cache-path`: Megatron's flat cache folder, shared by the recipe's stages."""
    return mixture_dir(output_root, recipe) / "cache"
