"""Mixture caches against Megatron-Core itself: its own builder, pointed at our cache folder,
builds nothing, and builds byte-identical files into an empty one; `explain` names exactly the
tokens of Megatron's `BlendedDataset[N]`."""

import filecmp
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from fw_assets.mixtures.cache import stage_caches, write_stage_cache
from fw_assets.mixtures.explain import explain_sample
from fw_assets.mixtures.gpt_indexes import plan_epochs
from fw_assets.mixtures.plan import plan_mixture
from fw_assets.mixtures.recipe import load_recipe
from fw_assets.lib.indexed_dataset import IndexedDatasetReader
from fw_assets_tests.token_trees import document_lengths, write_token_file

pytest.importorskip("megatron.core", reason="megatron-core (the `megatron` extra) is the oracle of these tests")
torch = pytest.importorskip("torch", reason="megatron-core needs torch")

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
    stage = plan_mixture(load_recipe(path), output, DUMPS).stages[0]
    ours = root / "ours"
    write_stage_cache(stage, ours)
    return stage, ours


@pytest.fixture(scope="module")
def process_group(tmp_path_factory):
    """Megatron builds a blend only under torch.distributed: a one-process gloo group."""
    import torch.distributed as dist

    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.fixture(scope="module", params=["blend", "int32"])
def case(request, tmp_path_factory):
    spec = BLEND_CASE if request.param == "blend" else INT32_CASE
    root = tmp_path_factory.mktemp(request.param)
    stage, ours = write_case(root, spec)
    return SimpleNamespace(spec=spec, stage=stage, ours=ours, root=root)


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


def test_case_covers_epochs_and_token_widths(case):
    """The blend case has a source read several times with its final epoch shuffled apart, and
    one read less than once; the int32 case's token files are int32."""
    epochs = []
    for cache in stage_caches(case.stage):
        for member, description, (begin, end) in zip(case.stage.members, cache.members, cache.documents):
            lengths = IndexedDatasetReader(Path(member.file.path)).sequence_lengths
            tokens = int(lengths[begin:end].sum())
            plan = plan_epochs(tokens, description["num_samples"], case.stage.seq_length)
            share = description["num_samples"] * case.stage.seq_length / tokens
            epochs.append((cache.split, member.file.source, plan.num_epochs, plan.separate_final_epoch, share))
    if case.spec is BLEND_CASE:
        assert len(case.stage.members) >= 8
        assert len({m.file.dump for m in case.stage.members}) == 3
        assert any(s == "train" and n >= 3 and sep for s, _, n, sep, _ in epochs)
        assert any(s == "train" and src == "low" and share < 1 for s, src, _, _, share in epochs)
        assert {split for split, *_ in epochs} == {"train", "valid", "test"}
    else:
        member = IndexedDatasetReader(Path(case.stage.members[0].file.path))
        assert member.dtype == np.int32
        assert {split for split, *_ in epochs} == {"train", "valid"}


def test_megatron_loads_our_cache_and_builds_nothing(case, process_group):
    before = snapshot(case.ours)
    datasets = megatron_build(case.stage, case.ours)
    assert snapshot(case.ours) == before
    built = [d for d in datasets if d is not None]
    assert [len(d) for d in built] == [sum(c.drawn) for c in stage_caches(case.stage)]


def test_megatron_builds_the_same_bytes(case, process_group):
    theirs = case.root / "theirs"
    theirs.mkdir(exist_ok=True)
    megatron_build(case.stage, theirs)
    names = sorted(os.listdir(theirs))
    assert names == sorted(os.listdir(case.ours))
    expected = sorted(n for cache in stage_caches(case.stage) for n in cache.file_names())
    assert names == expected
    _, mismatch, errors = filecmp.cmpfiles(theirs, case.ours, names, shallow=False)
    assert mismatch == [] and errors == []


def test_explain_names_the_tokens_of_megatrons_sample(case, process_group):
    datasets = megatron_build(case.stage, case.ours)
    rng = np.random.default_rng(0)
    for cache, blended in zip(stage_caches(case.stage), [d for d in datasets if d is not None]):
        for n in [0, 1, len(blended) - 1, *rng.integers(0, len(blended), 5)]:
            item = blended[int(n)]
            expected = np.concatenate([item["tokens"].numpy(), item["labels"].numpy()[-1:]])
            explained = explain_sample(case.stage, case.ours, cache.split, int(n))
            member = case.stage.members[int(item["dataset_id"])].file
            assert explained["dataset"] == member.prefix
            reader = IndexedDatasetReader(Path(member.path))
            tokens = [reader[d["document_index"]][d["offset"]: d["offset"] + d["length"]]
                      for d in explained["documents"]]
            assert np.array_equal(np.concatenate(tokens), expected)
            for d in explained["documents"]:
                assert d["id"] == f"<urn:uuid:{member.bucket}-{member.dump}-{d['document_index']:06d}>"
