"""Megatron-Core as the oracle of the mixture tests: its own builder run with a stage's flags, on
three planned cases (uint16 tokens over three splits; int32 tokens, no test split; the first with
its `top` source reweighted by synthetic probe losses, read through views)."""

from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import yaml

from fw_assets.formats.doc_index import read_document_index
from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import write_stage_cache
from fw_assets.mixtures.plan import plan_mixture
from fw_assets.mixtures.recipe import load_recipe
from fw_assets.mixtures.views import write_views
from fw_assets.paths import token_prefix
from fw_assets_tests.support.token_trees import document_lengths, write_token_file

DUMPS = ["CC-MAIN-2013-20", "CC-MAIN-2013-48", "CC-MAIN-2014-10"]
TOKENIZER = "synthetic"


# uint16 tokens, three splits, ten prefixes in three sources: `top` is small (several epochs),
# `mid` needs a second, short epoch (shuffled apart), `low` is large (a fraction of one epoch).
BLEND_CASE = SimpleNamespace(
    vocab_size=50_000, split="90,5,5", seq_length=64, tokens=400_000, seed=1234,
    sources={
        "top": {"buckets": ["4.0"], "weight": 0.5},
        "mid": {"buckets": ["3.0", "3.5"], "dumps": ["CC-MAIN-2013-*"], "weight": 0.3},
        "low": {"buckets": ["2.8"], "weight": 0.2},
    },
    documents={"4.0": 150, "3.0": 400, "3.5": 400, "2.8": 2_000},
)
# int32 tokens (vocabulary ≥ 65,500), no test split, weights by size, another seed
INT32_CASE = SimpleNamespace(
    vocab_size=100_257, split="98,2,0", seq_length=128, tokens=150_000, seed=77,
    sources={"all": {"buckets": ["3.5", "4.0"]}},
    documents={"3.5": 500, "4.0": 300},
)

# the blend case with `top` reweighted: drop the top 5 % by loss, repeat the rest up to twice
REWEIGHTED_CASE = SimpleNamespace(**{**vars(BLEND_CASE), "sources": {
    **BLEND_CASE.sources,
    "top": {**BLEND_CASE.sources["top"],
            "reweight": {"by": "probe_loss", "max_multiplier": 2.0, "drop_top_share": 0.05}},
}})


def synthetic_losses(output: Path, buckets, seed: int = 5):
    """A LossReader over the case's token files: log-normal losses, one per document of the dump's
    `buckets`, by id (every bucket's, whichever is asked for: looked up by id)."""
    def read(probe: str, dump: str, bucket: str) -> list[pa.RecordBatch]:
        ids = pa.concat_arrays([read_document_index(token_prefix(output, TOKENIZER, b, dump))["id"].combine_chunks()
                                for b in buckets])
        rng = np.random.default_rng([seed, DUMPS.index(dump)])
        return pa.table({"id": ids, "loss": rng.lognormal(np.log(5.0), 0.3, len(ids))}).to_batches()
    return read


def write_case(root: Path, case) -> tuple:
    rng = np.random.default_rng(case.seed)
    output = root / "out"
    for bucket, documents in case.documents.items():
        for dump in DUMPS:
            write_token_file(output, TOKENIZER, bucket, dump,
                             document_lengths(rng, documents, median=40), case.vocab_size, rng)
    recipe = {
        "tokenizer": TOKENIZER,
        "sources": case.sources,
        "phases": [{"name": "main", "tokens": case.tokens, "seq_length": case.seq_length}],
        "megatron": {"seed": case.seed, "split": case.split, "global_batch_size": 32,
                     "eval_interval": 50, "eval_iters": 2,
                     "tokenizer": {"type": "NullTokenizer", "vocab_size": case.vocab_size}},
    }
    path = root / "case.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    mixture = plan_mixture(load_recipe(path), output, DUMPS, synthetic_losses(output, case.documents))
    write_views(mixture.views)
    stage = mixture.stages[0]
    ours = root / "ours"
    write_stage_cache(stage, ours)
    return stage, ours


def megatron_build(stage, cache_dir: Path):
    """What `pretrain_gpt.py` does with the stage's flags: its data-args, split, seed, tokenizer."""
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list
    from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer

    vocab_size = int(stage.cache.tokenizer_identity["vocab_size"])
    tokenizer = build_tokenizer(SimpleNamespace(tokenizer_type="NullTokenizer", vocab_size=vocab_size))
    config = GPTDatasetConfig(
        random_seed=stage.cache.seed, sequence_length=stage.seq_length,
        blend=get_blend_from_list(stage.data_args.split()), split=stage.cache.split,
        path_to_cache=str(cache_dir), tokenizer=tokenizer,
        reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
    )
    builder = BlendedMegatronDatasetBuilder(GPTDataset, list(stage.num_samples), lambda: True, config)
    return builder.build()


def snapshot(folder: Path) -> dict[str, int]:
    return {path.name: path.stat().st_mtime_ns for path in folder.iterdir()}


@contextmanager
def megatron_process_group(folder: Path):
    """Megatron builds a blend only under torch.distributed: a one-process gloo group."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{folder / 'gloo-store'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def assert_explains(explained: dict, stage, item) -> None:
    """The documents `explain` names hold exactly the tokens (and last label) of Megatron's item."""
    member = stage.members[int(item["dataset_id"])].file
    assert explained["dataset"] == member.prefix
    reader = IndexedDatasetReader(Path(member.path))
    tokens = [reader[d["document_index"]][d["offset"]: d["offset"] + d["length"]] for d in explained["documents"]]
    expected = np.concatenate([item["tokens"].numpy(), item["labels"].numpy()[-1:]])
    assert np.array_equal(np.concatenate(tokens), expected)
    assert all(d["id"].startswith("<urn:uuid:") and d["dump"] == member.dump for d in explained["documents"])
