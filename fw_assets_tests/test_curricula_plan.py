"""Curricula: temperature schedules cut into stages, and each stage's fresh view of every token
file (disjoint while documents last, reused evenly after, long documents only where asked)."""

import copy
import math
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from fw_assets.layout import shipped_recipes_dir, views_dir
from fw_assets.lib.doc_index import read_document_index
from fw_assets.lib.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.megatron_cache import split_documents, split_matrix
from fw_assets.mixtures.plan import plan_mixture
from fw_assets.mixtures.recipe import RecipeError, load_recipe
from fw_assets.mixtures.views import write_views
from fw_assets_tests.token_trees import document_lengths, write_token_file

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


@pytest.fixture(scope="module")
def plenty(tmp_path_factory) -> Path:
    """Enough documents in every file for every stage to read fresh ones."""
    return write_tree(tmp_path_factory.mktemp("plenty"), {"4.0": 1_500, "3.5": 1_500, "3.0": 1_500})


@pytest.fixture(scope="module")
def scarce(tmp_path_factory) -> Path:
    """`top` far too small: its documents must be reused, as evenly as possible."""
    return write_tree(tmp_path_factory.mktemp("scarce"), {"4.0": 60, "3.5": 1_500, "3.0": 1_500})


def plan(tmp_path: Path, output_root: Path, recipe: dict = CURRICULUM):
    path = tmp_path / "curriculum.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return plan_mixture(load_recipe(path), output_root, DUMPS)


def cosine(start, end, s, k):
    return end + (start - end) * (1 + math.cos(math.pi * (s + 0.5) / k)) / 2


def test_stages_follow_the_schedule(tmp_path, plenty):
    mixture = plan(tmp_path, plenty)
    names = [s.name for s in mixture.stages]
    assert names == ["explore-1", "explore-2", "explore-3", "refine-1", "refine-2", "long"]
    expected_t = [cosine(2.0, 1.0, s, 3) for s in range(3)] + [1.0 - 0.3 * (s + 0.5) / 2 for s in range(2)] + [0.7]
    assert [s.temperature for s in mixture.stages] == pytest.approx(expected_t, abs=1e-12)
    assert mixture.stages[0].temperature > 1.9 and mixture.stages[2].temperature < 1.1
    for stage in mixture.stages:
        scaled = {name: w ** (1 / stage.temperature) for name, w in WEIGHTS.items()}
        for name, value in scaled.items():
            assert abs(stage.shares[name] - value / sum(scaled.values())) < 1e-9
            members = [m for m in stage.members if m.file.source == name]
            assert abs(sum(float(m.weight) for m in members) - stage.shares[name]) < 1e-9


def test_stage_tokens_add_up_and_samples_are_whole(tmp_path, plenty):
    recipe = copy.deepcopy(CURRICULUM)
    recipe["phases"][0]["tokens"] += 8 * 64 + 5  # not a whole number of batches per stage
    mixture = plan(tmp_path, plenty, recipe)
    for phase in recipe["phases"]:
        stages = [s for s in mixture.stages if s.phase == phase["name"]]
        assert sum(s.tokens for s in stages) == phase["tokens"]
        for stage in stages:
            assert stage.num_samples[0] == stage.tokens // phase["seq_length"]
        # every stage but the phase's last switches at a whole global batch
        assert all(s.num_samples[0] % 8 == 0 for s in stages[:-1])
    assert mixture.to_json()["phases"][0]["stages"][1]["name"] == "explore-2"


def member_samples(stage) -> list[int]:
    from fw_assets.mixtures.cache import stage_caches

    train = next(c for c in stage_caches(stage) if c.split == "train")
    return [d["num_samples"] for d in train.members]


def view_ids(selection, part: slice = slice(None)) -> list[str]:
    return read_document_index(Path(selection.view.path))["id"].to_pylist()[part]


def train_ids(selection) -> list[str]:
    return view_ids(selection, slice(selection.train_documents))


def test_views_are_fresh_and_one_epoch_long(tmp_path, plenty):
    mixture = plan(tmp_path, plenty)
    written = write_views(mixture)
    assert all(p.exists() for p in written)
    trained: dict[tuple[str, str], set[str]] = {}
    evaluated: dict[tuple[str, str], set[str]] = {}
    for selection in mixture.views:
        bin_file = Path(selection.view.path + ".bin")
        assert bin_file.is_symlink() and bin_file.resolve() == Path(selection.file.path + ".bin").resolve()
        ids = train_ids(selection)
        key = (selection.file.bucket, selection.file.dump)
        assert not trained.setdefault(key, set()) & set(ids), f"{selection.stage} rereads {key}"
        trained[key] |= set(ids)
        evaluated.setdefault(key, set()).update(view_ids(selection, slice(selection.train_documents, None)))
        assert selection.seen_before == 0 and not selection.repeats
    # validation documents are held out: no stage trains on what another evaluates on
    assert all(evaluated[key] and not evaluated[key] & trained[key] for key in trained)
    for stage in mixture.stages:
        bounds = split_matrix(stage.cache.split)[0]
        for member, samples, selection in zip(stage.members, member_samples(stage),
                                              [s for s in mixture.views if s.stage == stage.name]):
            reader = IndexedDatasetReader(Path(member.file.path))
            begin, end = split_documents(bounds, len(reader))
            assert end == selection.train_documents  # Megatron's train split is the view's train part
            assert reader.sequence_lengths[begin:end].sum() >= samples * stage.seq_length + 1
            original = IndexedDatasetReader(Path(selection.file.path))
            ids = read_document_index(Path(member.file.path))["id"].to_pylist()
            numbers = [int(i.rsplit("-", 1)[1].rstrip(">")) for i in ids]
            assert [np.array_equal(reader[k], original[n]) for k, n in enumerate(numbers)] == [True] * len(ids)


def test_views_staged_elsewhere_link_from_their_place(tmp_path, plenty):
    """Written into a staging folder and moved into place (publish by rename), views read the same."""
    mixture = plan(tmp_path, plenty)
    staging = plenty / ".staging" / "views-test"
    write_views(mixture, staging)
    final = views_dir(plenty, "curriculum")
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    for selection in mixture.views:
        reader = IndexedDatasetReader(Path(selection.view.path))
        original = IndexedDatasetReader(Path(selection.file.path))
        assert [np.array_equal(reader[k], original[int(d)]) for k, d in enumerate(selection.documents)] == \
            [True] * len(selection.documents)


def test_min_doc_tokens_keeps_long_documents(tmp_path, plenty):
    mixture = plan(tmp_path, plenty)
    write_views(mixture)
    long = [s for s in mixture.views if s.stage == "long"]
    assert long
    for selection in long:
        assert IndexedDatasetReader(Path(selection.view.path)).sequence_lengths.min() >= 80
    short = [s for s in mixture.views if s.stage == "explore-1"]
    assert min(IndexedDatasetReader(Path(s.view.path)).sequence_lengths.min() for s in short) < 80


def test_scarce_documents_are_reused_evenly(tmp_path, scarce):
    recipe = copy.deepcopy(CURRICULUM)
    del recipe["phases"][2]["min_doc_tokens"]
    mixture = plan(tmp_path, scarce, recipe)
    write_views(mixture)
    for dump in DUMPS:
        selections = [s for s in mixture.views if s.file.bucket == "4.0" and s.file.dump == dump]
        lengths = IndexedDatasetReader(Path(selections[0].file.path)).sequence_lengths
        uses = Counter(i for s in selections for i in train_ids(s))
        reader = IndexedDatasetReader(Path(selections[0].view.path))
        demand = sum(int(IndexedDatasetReader(Path(s.view.path)).sequence_lengths[:s.train_documents].sum())
                     for s in selections)
        supply = selections[0].eligible_tokens
        assert reader.document_count and demand > 2 * supply  # the case needs reuse
        assert max(uses.values()) <= math.ceil(demand / supply)
        assert len(uses) == selections[0].eligible_documents < len(lengths)  # all read before any again
        assert max(uses.values()) - min(uses.values()) <= 1
        assert selections[0].seen_before == 0 and selections[-1].seen_before > 0


def test_curriculum_recipe_errors(tmp_path, plenty, scarce):
    recipe = copy.deepcopy(CURRICULUM)
    recipe["phases"][0]["temperature"]["shape"] = "step"
    with pytest.raises(RecipeError, match=r"phases\[0\]\.temperature\.shape: 'step'"):
        plan(tmp_path, plenty, recipe)
    recipe = copy.deepcopy(CURRICULUM)
    recipe["fresh_documents"] = False
    with pytest.raises(RecipeError, match=r"phases\[2\]\.min_doc_tokens.*fresh_documents"):
        plan(tmp_path, plenty, recipe)
    recipe = copy.deepcopy(CURRICULUM)
    recipe["phases"][1]["temperature"]["stages"] = 11  # 10 global batches for 11 stages
    with pytest.raises(RecipeError, match=r"phases\[1\]\.temperature\.stages: 11 stages of at least one global batch"):
        plan(tmp_path, plenty, recipe)
    with pytest.raises(RecipeError, match=r"phases\[2\]\.min_doc_tokens: .*4\.0/CC-MAIN-2013-20: no document of at "
                                          r"least 80 tokens held out for the valid split of stage long"):
        plan(tmp_path, scarce)
    recipe = copy.deepcopy(CURRICULUM)
    recipe["export"] = "zip"
    with pytest.raises(RecipeError, match="export: 'zip'"):
        plan(tmp_path, plenty, recipe)


def test_shipped_curriculum_has_three_phases():
    recipe = load_recipe(shipped_recipes_dir() / "curriculum.yaml")
    assert [p.seq_length for p in recipe.phases] == [64, 128, 256]
    assert recipe.fresh_documents and recipe.export == ("packed",)


def test_views_are_drawn_by_id_and_seed(tmp_path, plenty):
    first, again = plan(tmp_path, plenty), plan(tmp_path, plenty)
    assert all(np.array_equal(a.documents, b.documents) for a, b in zip(first.views, again.views))
    recipe = copy.deepcopy(CURRICULUM)
    recipe["megatron"]["seed"] = 10
    other = plan(tmp_path, plenty, recipe)
    assert not np.array_equal(first.views[0].documents, other.views[0].documents)
