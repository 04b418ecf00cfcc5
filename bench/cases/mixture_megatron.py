"""Megatron-Core's own BlendedMegatronDatasetBuilder, single process (one-rank gloo group, one
builder thread), for the same recipe: what rank 0 does at the start of training.

    python -m bench.cases.mixture_megatron OUTPUT_ROOT RECIPE CACHE_DIR DUMP...
"""

import time
from types import SimpleNamespace

from bench.cases import mixture_case_parser, report
from fw_assets.mixtures.plan import plan_mixture
from fw_assets.mixtures.recipe import load_recipe


def main() -> None:
    parser = mixture_case_parser()
    args = parser.parse_args()
    stage = plan_mixture(load_recipe(args.recipe), args.output_root, args.dumps).stages[0]

    import torch.distributed as dist
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list
    from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer

    args.cache_dir.mkdir(parents=True, exist_ok=True)
    dist.init_process_group("gloo", init_method=f"file://{args.cache_dir}/.gloo", rank=0, world_size=1)
    vocab_size = int(stage.cache.tokenizer_identity["vocab_size"])
    config = GPTDatasetConfig(
        random_seed=stage.cache.seed, sequence_length=stage.seq_length,
        blend=get_blend_from_list(stage.data_args.split()), split=stage.cache.split,
        path_to_cache=str(args.cache_dir), num_dataset_builder_threads=1,
        tokenizer=build_tokenizer(SimpleNamespace(tokenizer_type="NullTokenizer", vocab_size=vocab_size)),
        reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
    )
    started = time.perf_counter()
    BlendedMegatronDatasetBuilder(GPTDataset, list(stage.num_samples), lambda: True, config).build()
    report(build_seconds=time.perf_counter() - started, prefixes=len(stage.members))
    dist.destroy_process_group()
    (args.cache_dir / ".gloo").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
