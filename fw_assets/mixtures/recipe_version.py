"""What a recipe's plan is made from, as one version: the recipe file's bytes, the published version
(fw_assets.lib.publish.data_version, what readers compare) of every token file of its tokenizer and,
for a recipe with reweighted sources, of every dump's losses of their probes. The data version of
`mixture_inputs`, observed by the `recipe_inputs` sensor."""

import hashlib
import json
from pathlib import Path

from fw_assets.formats.lineage import generation_state
from fw_assets.lib.publish import data_version
from fw_assets.mixtures.recipe import RecipeError, parse_recipe, read_recipe_bytes
from fw_assets.partitions import dump_partitions
from fw_assets.paths import publication_name


def inputs_version(root: Path, path: Path) -> str:
    """sha256 of the recipe file's bytes, of each dump's published token version and, with reweighted
    sources, of their probes' loss versions. A recipe that cannot be planned never stops the caller:
    one that cannot be parsed or checked has its bytes alone, one that cannot be read (too large,
    not a file) the reason."""
    try:
        recipe_bytes = read_recipe_bytes(path)
    except RecipeError as error:
        return hashlib.sha256(str(error).encode()).hexdigest()
    digest = hashlib.sha256(recipe_bytes)
    try:
        recipe = parse_recipe(path, recipe_bytes)
    except RecipeError:
        return digest.hexdigest()
    dumps = dump_partitions.get_partition_keys()
    tokenized = published_versions(root, [("tokenized", recipe.tokenizer)], dumps)
    digest.update(json.dumps(tokenized, sort_keys=True).encode())
    probes = sorted({s.reweight.probe for s in recipe.sources if s.reweight is not None})
    if probes:  # a recipe without `reweight:` keeps the version it had
        losses = published_versions(root, [("probe_loss", probe) for probe in probes], dumps)
        digest.update(json.dumps(losses, sort_keys=True).encode())
    return digest.hexdigest()


# The version of an output whose record cannot be trusted: a plan made before shows stale (reading
# it refuses the record, naming it).
REFUSED = "refused"


def published_versions(root: Path, outputs: list[tuple[str, str]], dumps: list[str]) -> dict[str, dict[str, str]]:
    """The published version of each (step, key) output of each dump that has one, by key and dump."""
    found: dict[str, dict[str, str]] = {}
    for step, key in outputs:
        for dump in dumps:
            state = generation_state(root, publication_name(step, key, dump), dump, False)
            if state.record is not None or state.refusal:
                found.setdefault(key, {})[dump] = data_version(state.record) if state.record else REFUSED
    return found
