"""contract.py: what a curriculum reads per source and stage, the checks that fail on too many
epochs and warn on needless repeats, and the blend error check on a blend that drifts."""

import copy

import numpy as np
import pytest

from fw_assets.mixtures.contract import (
    blend_errors,
    check_blend_error,
    check_max_epochs,
    check_phase_epochs,
    check_repeats_while_unseen,
    curriculum_outcomes,
    source_stages,
)
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import write_stage_cache
from fw_assets.mixtures.plan import plan_mixture
from fw_assets.mixtures.recipe import load_recipe
from fw_assets.mixtures.report import freshness_markdown
from fw_assets_tests.support.curriculum import CURRICULUM, plan
from fw_assets_tests.support.materialized_mixtures import RECIPE, write_recipe
from fw_assets_tests.support.runs import SAMPLE_DUMPS
from fw_assets_tests.support.token_trees import document_lengths, write_token_file


def test_plenty_reads_every_document_once(tmp_path, plenty):
    mixture = plan(tmp_path, plenty)
    rows = source_stages(mixture)
    assert [(r.stage, r.source) for r in rows[:3]] == [("explore-1", s) for s in ("top", "mid", "low")]
    for stage in mixture.stages:
        mine = [r for r in rows if r.stage == stage.name]
        drawn = sum(r.tokens_drawn for r in mine)
        assert stage.num_samples[0] * stage.seq_length <= drawn <= (stage.num_samples[0] + 3) * stage.seq_length
        for r in mine:
            assert r.seen_share == 0 and not r.repeats and r.unseen_after > 0
            assert r.epochs == pytest.approx(r.tokens_drawn / r.tokens_available)
    long = [r for r in rows if r.stage == "long"]
    explore = [r for r in rows if r.stage == "explore-1"]
    assert all(a.tokens_available < b.tokens_available for a, b in zip(long, explore))  # min_doc_tokens
    outcomes = curriculum_outcomes(mixture, rows)
    assert [o.check.name for o in outcomes if o.passed] == ["max_epochs", "phase_epochs", "repeats_while_unseen"]
    report = freshness_markdown(rows, outcomes)
    assert "| explore-1 | top |" in report and "- max_epochs: passed" in report


def test_scarce_source_fails_max_epochs_and_warns_on_repeats(tmp_path, scarce):
    recipe = copy.deepcopy(CURRICULUM)
    recipe["phases"][1]["max_epochs"] = 0.5
    del recipe["phases"][2]["min_doc_tokens"]  # top's few held-out documents are short
    mixture = plan(tmp_path, scarce, recipe)
    rows = source_stages(mixture)
    top = [r for r in rows if r.source == "top"]
    assert top[0].seen_share == 0 and top[-1].seen_share > 0.5 and top[-1].repeats
    outcome = check_max_epochs(mixture, rows)
    assert outcome.blocks and [v.problem.split(":")[0] for v in outcome.violations] == ["top in refine"]
    warning = check_repeats_while_unseen(rows)
    assert not warning.passed and not warning.blocks
    assert "top repeats documents while mid has" in warning.violations[0].problem
    assert "- max_epochs: FAILED\n  - top in refine" in freshness_markdown(rows, [outcome, warning])
    del recipe["phases"][1]["max_epochs"]
    recipe["phases"][2]["tokens"] *= 8  # no limit set: more than 4 epochs of top in the last phase warn
    mixture = plan(tmp_path, scarce, recipe)
    rows = source_stages(mixture)
    assert check_max_epochs(mixture, rows).passed
    outcome = check_phase_epochs(mixture, rows)
    assert not outcome.passed and not outcome.blocks and outcome.violations[0].problem.startswith("top in long")


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
