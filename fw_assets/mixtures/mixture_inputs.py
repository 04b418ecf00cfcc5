"""`mixture_inputs`: what a recipe's plan is made from, as a data version per recipe: the recipe
file's bytes, the published generation of every token file of its tokenizer and, for a recipe with
reweighted sources, of every dump's losses of their probes. `mixture_plan`
records the version it was planned from; when an observation ("Observe sources" in the UI) finds
another one (the recipe edited, a dump re-tokenized or newly tokenized, losses re-scored) the UI shows the plan stale
until it is planned again.
`megatron_indexes` and `packed` refuse such a plan whether or not anyone observed."""

import hashlib
import json

import dagster as dg

from fw_assets.layout import generation_record_path, publication_name
from fw_assets.mixtures.loss_inputs import loss_generations
from fw_assets.mixtures.partitions import PER_RECIPE, current_recipe_files
from fw_assets.mixtures.recipe import RecipeError, load_recipe
from fw_assets.partitions import dump_partitions
from fw_assets.resources import FineWebStorage


@dg.observable_source_asset(
    **PER_RECIPE,
    required_resource_keys={"storage"},
    description="Each recipe's inputs as a data version: the sha256 of its YAML bytes, the "
    "generations of the token files of its tokenizer and of the probe losses its reweighted sources read. Observe it to see which plans are stale.",
)
def mixture_inputs(context: dg.AssetExecutionContext) -> dg.DataVersionsByPartition:
    storage: FineWebStorage = context.resources.storage
    return dg.DataVersionsByPartition({
        name: dg.DataVersion(inputs_version(storage.output_root, path.read_bytes(), path))
        for name, path in current_recipe_files().items()
    })


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
