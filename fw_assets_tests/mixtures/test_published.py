"""published.py: a plan.json read back gives each stage as planned, by name."""

import json

import pytest

from fw_assets.mixtures.published import planned_stages, stage_from_plan_json, stage_names
from fw_assets_tests.support.curriculum import plan as plan_curriculum
from fw_assets_tests.support.one_phase import plan


def test_plan_json_gives_back_each_stage(tmp_path, output_root):
    mixture = plan(tmp_path, output_root)
    written = json.loads(json.dumps(mixture.to_json()))
    assert stage_from_plan_json(written, "main") == mixture.stages[0]
    with pytest.raises(KeyError, match="no stage 'nope'"):
        stage_from_plan_json(written, "nope")


def test_stage_names_are_in_training_order(tmp_path, plenty):
    mixture = plan_curriculum(tmp_path, plenty)
    written = json.loads(json.dumps(mixture.to_json()))
    assert stage_names(written) == ["explore-1", "explore-2", "explore-3", "refine-1", "refine-2", "long"]
    assert planned_stages(written) == list(mixture.stages)
