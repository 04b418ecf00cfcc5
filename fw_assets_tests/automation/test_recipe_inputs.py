"""The `recipe_inputs` sensor: recipes that cannot be read (nested too deep, too large, a FIFO, a
folder) are observed with a version of their own, and stop neither the sensor nor the other recipes."""

import dagster as dg

from fw_assets.automation.recipe_inputs import recipe_inputs
from fw_assets.mixtures.mixture_inputs import mixture_inputs
from fw_assets.settings import MIXTURES_DIR_ENV
from fw_assets_tests.support.bad_recipes import write_bad_recipes
from fw_assets_tests.support.materialized_mixtures import RECIPE, RECIPE_NAME, write_recipe
from fw_assets_tests.support.runs import resources


def test_recipes_that_cannot_be_read_stop_neither_the_sensor_nor_the_other_recipes(
    sample_source, tmp_path, monkeypatch
):
    folder = write_recipe(tmp_path / "recipes", RECIPE).parent
    bad = write_bad_recipes(folder)
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(folder))
    storage = resources(sample_source, tmp_path / "output")["storage"]
    with dg.DagsterInstance.ephemeral() as instance:
        context = dg.build_sensor_context(instance=instance, resources={"storage": storage})
        message = recipe_inputs(context).skip_message
        assert message.startswith("Recorded new inputs of") and RECIPE_NAME in message
        observed = {
            record.partition_key
            for record in instance.fetch_observations(mixture_inputs.key, limit=100).records
        }
        assert {RECIPE_NAME, *bad} <= observed
