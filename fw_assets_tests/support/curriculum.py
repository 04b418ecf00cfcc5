"""A three-phase curriculum with fresh documents over two dumps of small token files, and what
its tests read of the views."""

from pathlib import Path

import numpy as np
import yaml

from fw_assets.formats.doc_index import read_document_index
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import stage_caches
from fw_assets.mixtures.plan import plan_mixture
from fw_assets.mixtures.recipe import load_recipe
from fw_assets_tests.support.token_trees import document_lengths, write_token_file

DUMPS = ["CC-MAIN-2013-20", "CC-MAIN-2013-48"]
WEIGHTS = {"top": 0.5, "mid": 0.3, "low": 0.2}


CURRICULUM = {
    "tokenizer": "synthetic",
    "fresh_documents": True,
    "sources": {
        "top": {"buckets": ["4.0"], "weight": 0.5},
        "mid": {"buckets": ["3.5"], "weight": 0.3},
        "low": {"buckets": ["3.0"], "weight": 0.2},
    },
    "phases": [
        {"name": "explore", "tokens": 8 * 64 * 30, "seq_length": 64,
         "temperature": {"from": 2.0, "to": 1.0, "shape": "cosine", "stages": 3}},
        {"name": "refine", "tokens": 8 * 128 * 10, "seq_length": 128,
         "temperature": {"from": 1.0, "to": 0.7, "shape": "linear", "stages": 2}},
        {"name": "long", "tokens": 8 * 256 * 4, "seq_length": 256, "temperature": 0.7, "min_doc_tokens": 80},
    ],
    "megatron": {"seed": 9, "split": "95,5,0", "global_batch_size": 8, "eval_interval": 20, "eval_iters": 1,
                 "tokenizer": {"type": "NullTokenizer", "vocab_size": 50_000}},
}


def write_tree(root: Path, documents: dict[str, int]) -> Path:
    rng = np.random.default_rng(4)
    for bucket, count in documents.items():
        for dump in DUMPS:
            write_token_file(root, "synthetic", bucket, dump, document_lengths(rng, count, 40), 50_000, rng)
    return root


def plan(tmp_path: Path, output_root: Path, recipe: dict = CURRICULUM):
    path = tmp_path / "curriculum.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return plan_mixture(load_recipe(path), output_root, DUMPS)


def member_samples(stage) -> list[int]:
    train = next(c for c in stage_caches(stage) if c.split == "train")
    return [d["num_samples"] for d in train.members]


def view_ids(selection, part: slice = slice(None)) -> list[str]:
    return read_document_index(Path(selection.view.path))["id"].to_pylist()[part]


def train_ids(selection) -> list[str]:
    return view_ids(selection, slice(selection.train_documents))
