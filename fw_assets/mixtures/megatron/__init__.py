"""Megatron-Core 0.16's dataset builder (`megatron/core/datasets/`), reproduced byte for byte so its
cache can be built ahead of training. Each module is named after the Megatron file it mirrors, to
be read side by side:

- `utils`: the split names and `normalize`;
- `blended_megatron_dataset_config`: `--split` into the split matrix, the flags every description names;
- `megatron_dataset`: a description's text, md5 and the cache file names;
- `gpt_dataset`: one GPTDataset's description, its document, sample and shuffle indexes, and the
  pieces of documents a sample covers;
- `blended_dataset`: a BlendedDataset's description, its dataset index and dataset sample index,
  and the lookup of a blend sample;
- `helpers`: the compiled draw loop (`build_blending_indices` of `helpers.cpp`);
- `blended_megatron_dataset_builder`: every cache file of a planned stage, named and written.
"""

# every module above: they all decide the cache's bytes (the assets' code versions hash them)
MODULES = tuple(f"{__name__}.{name}" for name in (
    "utils", "blended_megatron_dataset_config", "megatron_dataset", "gpt_dataset", "blended_dataset", "helpers",
    "blended_megatron_dataset_builder",
))
