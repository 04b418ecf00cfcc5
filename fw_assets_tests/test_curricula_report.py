"""The curriculum's report: per source and stage what is available, drawn and read again; checks
that fail on too many epochs and warn on needless repeats; the plan's table and picture."""

import copy

import numpy as np
import pytest

from fw_assets.layout import shares_picture_path
from fw_assets.mixtures.curriculum_report import (
    check_max_epochs,
    check_phase_epochs,
    check_repeats_while_unseen,
    curriculum_outcomes,
    freshness_markdown,
    plot_shares,
    source_stages,
)
from fw_assets_tests.test_curricula_plan import CURRICULUM, plan, plenty, scarce  # noqa: F401


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


def test_picture(tmp_path, plenty):
    mixture = plan(tmp_path, plenty)
    png = plot_shares(mixture, shares_picture_path(tmp_path, "curriculum"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib import image

    pixels = image.imread(png)
    assert pixels.shape[1] == 900 and len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 5
