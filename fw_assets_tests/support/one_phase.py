"""A one-phase recipe over three dumps of small token files: what the plan tests plan."""

import copy
from pathlib import Path

import numpy as np
import yaml

from fw_assets.mixtures.plan import plan_mixture
from fw_assets.mixtures.recipe import load_recipe
from fw_assets_tests.support.token_trees import document_lengths, write_token_file

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


def write_tree(root: Path) -> Path:
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


def mutate(path: list, value):
    recipe = copy.deepcopy(RECIPE)
    target = recipe
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return recipe
