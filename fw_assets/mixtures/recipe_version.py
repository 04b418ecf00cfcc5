"""What a recipe's plan is made from, as one version: the recipe file's bytes, the published
generation of every token file of its tokenizer and, for a recipe with reweighted sources, of every
dump's losses of their probes. The data version of `mixture_inputs`, observed by the
`recipe_inputs` sensor."""

import hashlib
import json

from fw_assets.paths import generation_record_path, publication_name
from fw_assets.mixtures.loss_inputs import loss_generations
from fw_assets.mixtures.recipe import RecipeError, load_recipe
from fw_assets.partitions import dump_partitions


def inputs_version(root, recipe_bytes: bytes, path) -> str:
    """sha256 of the recipe's bytes, of each dump's published token generation and, with reweighted
    sources, of their probes' loss generations (none for a recipe that cannot be read: its bytes alone)."""
    digest = hashlib.sha256(recipe_bytes)
    try:
        recipe = load_recipe(path)
    except RecipeError:
        return digest.hexdigest()
    tokenizer = recipe.tokenizer
    generations = {}
    for dump in dump_partitions.get_partition_keys():
        record = generation_record_path(root, publication_name("tokenized", tokenizer, dump))
        if record.is_file():
            generations[dump] = json.loads(record.read_text())["generation"]
    digest.update(json.dumps(generations, sort_keys=True).encode())
    probes = sorted({s.reweight.probe for s in recipe.sources if s.reweight is not None})
    if probes:  # a recipe without `reweight:` keeps the version it had
        digest.update(json.dumps(loss_generations(root, probes, dump_partitions.get_partition_keys()), sort_keys=True).encode())
    return digest.hexdigest()
