"""One static partition per mixture recipe: the stems of `fw_assets/mixtures/*.yaml` and of
`$FW_MIXTURES_DIR/*.yaml`, found when the code location loads (a new file needs a reload, as a new
dump folder does). A recipe in `$FW_MIXTURES_DIR` with a shipped recipe's stem replaces it."""

import hashlib
import logging
from pathlib import Path

import dagster as dg

from fw_assets import settings
from fw_assets.mixtures.recipe import read_recipe_bytes
from fw_assets.paths import NAME_RULE, is_safe_name, shipped_recipes_dir

logger = logging.getLogger(__name__)


def recipe_files(shipped: Path, user: Path | None) -> dict[str, Path]:
    """Each recipe's file by name (its stem); a user recipe wins over a shipped one of its name."""
    found = {path.stem: path for path in _named_recipes(shipped)}
    if user is None:
        return found
    if not user.is_dir():
        logger.warning("%s=%s is not a folder: only the shipped recipes are loaded", settings.MIXTURES_DIR_ENV, user)
        return found
    for path in _named_recipes(user):
        if path.stem in found:
            logger.warning("Recipe %s replaces the shipped recipe %s of the same name", path, found[path.stem])
        found[path.stem] = path
    return found


def _named_recipes(folder: Path) -> list[Path]:
    """The `*.yaml` files of `folder` whose stem may name a partition and a folder."""
    files = []
    for path in sorted(folder.glob("*.yaml")):
        if is_safe_name(path.stem):
            files.append(path)
        else:
            logger.warning("Recipe %r in %s is not loaded: its name %r %s", path.name, folder, path.stem, NAME_RULE)
    return files


def current_recipe_files() -> dict[str, Path]:
    """The recipe files as they are now (a run reads its recipe from here, not from load time)."""
    return recipe_files(shipped_recipes_dir(), settings.mixtures_dir())


def recipe_file(recipe: str) -> Path:
    """The file of recipe `recipe`, with an error saying where recipes are looked for."""
    files = current_recipe_files()
    if recipe not in files:
        raise dg.Failure(
            f"Recipe {recipe}: no file {recipe}.yaml in {shipped_recipes_dir()} or "
            f"{settings.MIXTURES_DIR_ENV}={settings.mixtures_dir()}; nothing was published."
        )
    return files[recipe]


def refuse_an_edited_recipe(recipe: str, plan_record: dict) -> None:
    """A plan is made from its recipe's bytes: refuse to build over it once they changed."""
    path = recipe_file(recipe)
    planned = plan_record["contents"].get("recipe_sha256")
    now = hashlib.sha256(read_recipe_bytes(path)).hexdigest()
    if planned != now:
        raise dg.Failure(
            f"Recipe {recipe}: the plan is stale, {path} changed since it was planned (sha256 "
            f"{(planned or 'not recorded')[:12]}, now {now[:12]}). Materialize the plan again "
            f"(--select 'mixture_plan*' --partition {recipe}). Nothing was published."
        )


recipe_partitions = dg.StaticPartitionsDefinition(sorted(current_recipe_files()))

# What every per-recipe asset shares. A group of its own: neither a dump's runs nor a dump backfill
# (groups `fineweb_edu`, `fineweb_edu_kept`) select them.
PER_RECIPE = dict(partitions_def=recipe_partitions, group_name="mixtures")
