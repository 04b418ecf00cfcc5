"""`mixture_inputs`: what a recipe's plan is made from, as a data version per recipe: the recipe
file's bytes, the published generation of every token file of its tokenizer and, for a recipe with
reweighted sources, of every dump's losses of their probes. `mixture_plan`
records the version it was planned from; when an observation (the `recipe_inputs` sensor, every
minute, or "Observe sources" in the UI) finds another one (the recipe edited, a dump re-tokenized
or newly tokenized, losses re-scored) the UI shows the plan stale until it is planned again.
`megatron_indexes` and `packed` refuse such a plan whether or not anyone observed."""

import dagster as dg

from fw_assets.mixtures.partitions import PER_RECIPE, current_recipe_files
from fw_assets.mixtures.recipe_version import inputs_version
from fw_assets.resources import AnotherOutputFolder, FineWebStorage


@dg.observable_source_asset(
    **PER_RECIPE,
    required_resource_keys={"storage"},
    description="Each recipe's inputs as a data version: the sha256 of its YAML bytes, the "
    "generations of the token files of its tokenizer and of the probe losses its reweighted sources read. "
    "Observe it to see which plans are stale.",
)
def mixture_inputs(context: dg.AssetExecutionContext) -> dg.DataVersionsByPartition:
    storage: FineWebStorage = context.resources.storage
    try:
        storage.claim(context.instance)  # an observation describes the outputs of one folder
    except AnotherOutputFolder as refused:
        raise dg.Failure(description=str(refused)) from refused
    return dg.DataVersionsByPartition({
        name: dg.DataVersion(inputs_version(storage.output_root, path))
        for name, path in current_recipe_files().items()
    })
