"""recipe.py: the shipped recipes load; a temperature schedule takes its shape from the registry,
and a shape nobody registered is refused naming the file, the key and the shapes there are."""

import copy
import math

import pytest
import yaml

from fw_assets.layout import shipped_recipes_dir
from fw_assets.mixtures.recipe import SCHEDULE_SHAPES, RecipeError, Schedule, load_recipe
from fw_assets_tests.mixtures.curriculum import CURRICULUM


def test_shipped_recipes_load():
    recipes = sorted(shipped_recipes_dir().glob("*.yaml"))
    assert {p.stem for p in recipes} >= {"demo", "fineweb_edu_1t"}
    for path in recipes:
        recipe = load_recipe(path)
        assert recipe.name == path.stem and recipe.stages()


def test_shipped_curriculum_has_three_phases():
    recipe = load_recipe(shipped_recipes_dir() / "curriculum.yaml")
    assert [p.seq_length for p in recipe.phases] == [64, 128, 256]
    assert recipe.fresh_documents and recipe.export == ("packed",)


def test_an_unknown_schedule_shape_names_the_file_the_key_and_the_shapes(tmp_path):
    recipe = copy.deepcopy(CURRICULUM)
    recipe["phases"][1]["temperature"]["shape"] = "step"
    path = tmp_path / "curriculum.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    with pytest.raises(RecipeError) as error:
        load_recipe(path)
    assert error.value.path == path and error.value.key == "phases[1].temperature.shape"
    assert str(path) in str(error.value)
    assert all(repr(shape) in error.value.problem for shape in ("step", *SCHEDULE_SHAPES))


@pytest.mark.parametrize("shape", sorted(SCHEDULE_SHAPES))
def test_every_shape_moves_from_start_to_end(shape):
    """A stage's temperature is the shape's at the middle of its share: the first near `from`, the
    last near `to`, and none outside them."""
    schedule = Schedule(2.0, 1.0, shape, 8)
    temperatures = [schedule.at(stage) for stage in range(8)]
    assert temperatures == sorted(temperatures, reverse=True)
    assert 1.0 < temperatures[-1] < temperatures[0] < 2.0
    assert temperatures[0] == SCHEDULE_SHAPES[shape](2.0, 1.0, 0.5 / 8)
    assert SCHEDULE_SHAPES[shape](2.0, 1.0, 0.0) == 2.0 and math.isclose(SCHEDULE_SHAPES[shape](2.0, 1.0, 1.0), 1.0)
