"""Training mixtures: recipes (YAML) planned over the token files, and Megatron-Core's own sample,
shuffle and blend indexes built ahead of training, byte for byte (see the README, "Mixtures").

Plain modules, no Dagster: `recipe` (parse, check), `plan` (prefixes, weights, sample counts,
flags), `cache` (the cache files), `gpt_indexes` and `blend` (the index builders), `explain`;
curricula: `views` (each stage's fresh documents), `curriculum_report` (freshness, checks,
table, picture), `packed` (samples as parquet rows).
"""
