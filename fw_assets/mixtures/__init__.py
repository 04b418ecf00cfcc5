"""Training mixtures: recipes (YAML) planned over the token files, and Megatron-Core's own sample,
shuffle and blend indexes built ahead of training, byte for byte (see the README, "Training mixtures").

Plain modules, no Dagster: `recipe` (parse, check), `plan` (prefixes, weights, sample counts,
flags), `cache` (the cache files), `gpt_indexes` and `blend` (the index builders), `explain`,
`contract` (the per-recipe checks), `report` (report.md, blend.md, metadata tables);
curricula: `views` (each stage's fresh documents), `curriculum_report` (freshness, checks,
table, picture), `packing` (samples as parquet rows).
Dagster: `partitions` (one partition per recipe), the assets `mixture_plan`, `megatron_indexes` and
`packed` (only with `export: packed`);
`__main__` is the `explain` command.
"""
