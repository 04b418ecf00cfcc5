"""The `megatron_indexes` asset through Dagster on the tokenized sample dumps: Megatron-Core reads its
cache, builds nothing and gets the same samples; a plan made before a dump was re-tokenized is
refused with nothing changed."""

import filecmp
import shutil

import numpy as np

from fw_assets.layout import mixture_cache_dir
from fw_assets.mixtures.megatron_indexes import megatron_indexes
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.conftest import SAMPLE_DUMPS
from fw_assets_tests.helpers import published_tree
from fw_assets_tests.mixtures.materialized import RECIPE_NAME, build, tokenize
from fw_assets_tests.mixtures.megatron_oracle import megatron_build, megatron_process_group, snapshot
from fw_assets_tests.extras import extra_module


def test_megatron_reads_the_assets_cache_builds_nothing_and_gets_the_same_samples(demo_built, tmp_path):
    extra_module("megatron.core", "megatron")

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
    assert f"re-tokenized since it was made: {SAMPLE_DUMPS[0]}" in failure.step_failure_data.error.message
    assert published_tree(output) == before
    assert build(sample_source, output).success  # the plan again, then the indexes
