"""Recipes and plans: what training will be told (weights, sample counts, flags), and every bad
recipe refused with its file and key named."""

import copy
import filecmp
import json
import os
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from fw_assets.layout import shipped_recipes_dir
from fw_assets.mixtures.cache import write_stage_cache
from fw_assets.mixtures.megatron_cache import normalize
from fw_assets.mixtures.plan import plan_mixture, stage_from_plan_json
from fw_assets.mixtures.recipe import RecipeError, load_recipe
from fw_assets.layout import docs_path
from fw_assets_tests.token_trees import document_lengths, write_token_file

DUMPS = ["CC-MAIN-2013-20", "CC-MAIN-2013-48", "CC-MAIN-2014-10"]
RECIPE = {
    "tokenizer": "synthetic",
    "sources": {
        "top": {"buckets": ["4.0"], "weight": 0.6},
        "mid": {"buckets": ["3.0", "3.5"], "dumps": ["CC-MAIN-2013-*"], "weight": 0.4},
    },
    "phases": [{"name": "main", "tokens": 1_000_000, "seq_length": 100, "temperature": 1.0}],
    "megatron": {"seed": 5, "split": "99,1,0", "global_batch_size": 16, "eval_interval": 40,
                 "eval_iters": 3, "data_root": "/mnt/train",
                 "tokenizer": {"type": "NullTokenizer", "vocab_size": 50000}},
}


@pytest.fixture(scope="module")
def output_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("out")
    rng = np.random.default_rng(3)
    for bucket in ["3.0", "3.5", "4.0"]:
        for dump in DUMPS:
            write_token_file(root, "synthetic", bucket, dump, document_lengths(rng, 200, 50), 50_000, rng)
    return root


def write_recipe(tmp_path: Path, recipe: dict, name: str = "mix") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def plan(tmp_path, output_root, recipe=RECIPE, dumps=DUMPS):
    return plan_mixture(load_recipe(write_recipe(tmp_path, recipe)), output_root, dumps)


def test_weights_follow_sources_then_tokens(tmp_path, output_root):
    stage = plan(tmp_path, output_root).stages[0]
    assert [(m.file.source, m.file.bucket, m.file.dump) for m in stage.members] == [
        ("top", "4.0", d) for d in DUMPS] + [("mid", b, d) for b in ["3.0", "3.5"] for d in DUMPS[:2]]
    for source, share in [("top", 0.6), ("mid", 0.4)]:
        members = [m for m in stage.members if m.file.source == source]
        tokens = sum(m.file.tokens for m in members)
        assert math.isclose(sum(float(m.weight) for m in members), share, rel_tol=1e-12)
        for m in members:
            assert math.isclose(float(m.weight), share * m.file.tokens / tokens, rel_tol=1e-12)
    lines = stage.data_args.splitlines()
    assert lines[0] == f"{stage.members[0].weight} /mnt/train/tokenized/synthetic/4.0/CC-MAIN-2013-20"


def test_temperature_and_weights_by_size(tmp_path, output_root):
    recipe = copy.deepcopy(RECIPE)
    recipe["phases"][0]["temperature"] = 2.0
    stage = plan(tmp_path, output_root, recipe).stages[0]
    expected = normalize([0.6 ** 0.5, 0.4 ** 0.5])
    assert stage.shares == pytest.approx({"top": expected[0], "mid": expected[1]}, rel=1e-12)
    del recipe["sources"]["top"]["weight"], recipe["sources"]["mid"]["weight"]
    recipe["phases"][0]["temperature"] = 1.0
    stage = plan(tmp_path, output_root, recipe).stages[0]
    total = sum(m.file.tokens for m in stage.members)
    for m in stage.members:
        assert math.isclose(float(m.weight), m.file.tokens / total, rel_tol=1e-12)


def test_sample_counts_and_flags_are_what_training_asks(tmp_path, output_root):
    mixture = plan(tmp_path, output_root)
    stage = mixture.stages[0]
    train = 1_000_000 // 100
    train_iters = train // 16
    assert stage.num_samples == (train, (train_iters // 40 + 1) * 3 * 16, 3 * 16)
    args = dict(zip(stage.megatron_args[::2], stage.megatron_args[1::2]))
    assert args == {
        "--data-args-path": "/mnt/train/mixtures/mix/main.data-args.txt", "--split": "99,1,0",
        "--seq-length": "100", "--seed": "5", "--train-samples": str(train),
        "--global-batch-size": "16", "--eval-interval": "40", "--eval-iters": "3",
        "--data-cache-path": "/mnt/train/mixtures/mix/cache",
        "--tokenizer-type": "NullTokenizer", "--vocab-size": "50000",
    }
    plan_json = mixture.to_json()
    assert plan_json["phases"][0]["stages"][0]["num_samples"] == list(stage.num_samples)
    assert plan_json["cache_dir"] == "/mnt/train/mixtures/mix/cache"


def test_plan_json_gives_back_each_stage(tmp_path, output_root):
    mixture = plan(tmp_path, output_root)
    written = json.loads(json.dumps(mixture.to_json()))
    assert stage_from_plan_json(written, "main") == mixture.stages[0]
    with pytest.raises(KeyError, match="no stage 'nope'"):
        stage_from_plan_json(written, "nope")


def test_phases_switch_at_whole_iterations(tmp_path, output_root):
    recipe = copy.deepcopy(RECIPE)
    recipe["phases"] = [{"name": "short", "tokens": 16 * 64 * 50, "seq_length": 64},
                        {"name": "long", "tokens": 300_000, "seq_length": 128, "temperature": 0.7}]
    stages = plan(tmp_path, output_root, recipe).stages
    assert [s.num_samples[0] for s in stages] == [800, 300_000 // 128]
    total = 800 + 300_000 // 128
    for stage in stages:
        args = dict(zip(stage.megatron_args[::2], stage.megatron_args[1::2]))
        assert args["--train-samples"] == str(total)
        assert args["--phase-transition-iterations"] == "50"
        assert stage.num_samples[1:] == stages[0].num_samples[1:]
    recipe["phases"][0]["tokens"] += 64
    with pytest.raises(RecipeError, match=r"phases\[0\]\.tokens.*multiple of global_batch_size"):
        plan(tmp_path, output_root, recipe)


def mutate(path: list, value):
    recipe = copy.deepcopy(RECIPE)
    target = recipe
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return recipe


@pytest.mark.parametrize("recipe, key, problem", [
    (mutate(["sources", "mid", "buckets"], ["3.0", "3.7"]), "sources.mid.buckets[1]", "unknown bucket"),
    (mutate(["sources", "mid", "dumps"], ["CC-MAIN-2099-*"]), "sources.mid.dumps[0]", "matches none"),
    (mutate(["sources", "top", "weight"], -0.1), "sources.top.weight", "negative weight"),
    (mutate(["sources", "top", "weight"], 0), None, None),
    (mutate(["sources"], {"a": {"buckets": ["4.0"], "weight": 0}, "b": {"buckets": ["3.0"], "weight": 0.0}}),
     "sources", "every weight is zero"),
    (mutate(["sources", "mid", "buckets"], ["2.8"]), "sources.mid", "no tokens"),
    (mutate(["sources", "top", "wieght"], 1), "sources.top.wieght", "unknown key"),
    (mutate(["megatron", "split"], "1,2,3,4"), "megatron.split", "at most 3"),
    (mutate(["sources", "mid", "buckets"], ["4.0"]), "sources.mid", "already in source top"),
    (mutate(["phases"], []), "phases", "non-empty list"),
])
def test_bad_recipes_name_file_and_key(tmp_path, output_root, recipe, key, problem):
    if key is None:  # a zero weight alone is fine: the source is left out of the blend
        assert {m.file.source for m in plan(tmp_path, output_root, recipe).stages[0].members} == {"mid"}
        return
    with pytest.raises(RecipeError) as error:
        plan(tmp_path, output_root, recipe)
    assert error.value.key == key and problem in error.value.problem
    assert str(tmp_path / "mix.yaml") in str(error.value)


def test_missing_token_files_are_refused(tmp_path, output_root):
    with pytest.raises(RecipeError, match="missing tokenized files: dump CC-MAIN-2015-01") as error:
        plan(tmp_path, output_root, dumps=DUMPS + ["CC-MAIN-2015-01"])
    assert error.value.key == "sources.top"
    broken = tmp_path / "broken"
    rng = np.random.default_rng(0)
    prefix = write_token_file(broken, "synthetic", "4.0", DUMPS[0], document_lengths(rng, 50, 20), 50_000, rng)
    docs_path(prefix).unlink()
    recipe = mutate(["sources"], {"top": {"buckets": ["4.0"]}})
    with pytest.raises(RecipeError, match=r"incomplete tokenized files, missing .*docs\.parquet"):
        plan(tmp_path, broken, recipe, dumps=DUMPS[:1])


def test_more_prefixes_than_a_blend_takes(tmp_path):
    """32,767 token files (empty files suffice: the count is checked before any is read). Each
    is a hard link to one empty file per bucket and suffix: 98k new inodes take the disk far longer."""
    root = tmp_path / "many"
    dumps = [f"CC-MAIN-{2000 + i // 60}-{i % 60 + 1:02d}" for i in range(8192)]
    for bucket in ["2.8", "3.0", "3.5", "4.0"]:
        folder = root / "tokenized" / "synthetic" / bucket
        folder.mkdir(parents=True)
        for suffix in (".bin", ".idx", ".docs.parquet"):
            empty = tmp_path / f"empty-{bucket}{suffix}"
            empty.touch()
            for dump in dumps[: 8192 if bucket != "4.0" else 8191]:
                os.link(empty, folder / f"{dump}{suffix}")
    recipe = mutate(["sources"], {"all": {"buckets": ["2.8", "3.0", "3.5", "4.0"]}})
    with pytest.raises(RecipeError, match="32767 token files; a Megatron blend takes at most 32766"):
        plan(tmp_path, root, recipe, dumps)


def test_shipped_recipes_load():
    recipes = sorted(shipped_recipes_dir().glob("*.yaml"))
    assert {p.stem for p in recipes} >= {"demo", "fineweb_edu_1t"}
    for path in recipes:
        recipe = load_recipe(path)
        assert recipe.name == path.stem and recipe.stages()


def test_parallel_build_writes_the_same_files(tmp_path, output_root):
    """Members built in worker processes while a thread draws the blends: the same bytes."""
    stage = plan(tmp_path, output_root).stages[0]
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    written = write_stage_cache(stage, serial)
    assert sorted(p.name for p in write_stage_cache(stage, parallel, workers=2)) == sorted(p.name for p in written)
    names = sorted(os.listdir(serial))
    assert names == sorted(os.listdir(parallel)) and len(names) == len(written)
    _, mismatch, errors = filecmp.cmpfiles(serial, parallel, names, shallow=False)
    assert mismatch == [] and errors == []
