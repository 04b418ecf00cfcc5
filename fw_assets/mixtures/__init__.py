"""Training mixtures: recipes (YAML) planned over the token files, and Megatron-Core's own sample,
shuffle and blend indexes built ahead of training, byte for byte (docs/mixtures.md).

Plain modules, no Dagster:
- `recipe`: a recipe file parsed and checked (every mistake a `RecipeError` naming file and key),
  with the registry of temperature schedule shapes;
- `plan`: prefixes, weights, sample counts and flags of every stage, as `stage_plan`'s classes
  (below every module that reads a plan); `views`: each stage's fresh documents (curricula);
- `megatron/`: Megatron-Core's dataset builder, one module per Megatron file (`gpt_dataset`,
  `blended_dataset`, `helpers`, `blended_megatron_dataset_builder`, ...): the cache files' names
  and bytes;
- `published`: the one reader of what the assets published (plan.json's stages, a blend sample's
  documents in the cache), used by `explain`, `packing`, the assets and the demo;
- `contract`: the per-recipe contract (plan, curriculum, built blends); `report`: report.md,
  shares.png, blend.md and the metadata tables;
- `reweighting`: the capped loss-based reweighting rule; `reweighted`: reweighted sources' views;
- `explain`: the documents of one training sample; `packing`: samples as parquet rows.
Dagster: `partitions` (one partition per recipe), `tokenized_inputs` (the token files the assets
read), `recipe_version` (the version of what a plan is made from), and one module per asset (each
with its check specs): `mixture_plan`,
`megatron_indexes` and `packed` (only with `export: packed`); `__main__` is the `explain` command.
"""
