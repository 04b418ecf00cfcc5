"""recipe.py: the shipped recipes load; a temperature schedule takes its shape from the registry,
and a shape nobody registered is refused naming the file, the key and the shapes there are."""

import copy
import math
import os
import threading

import pytest
import yaml

from fw_assets.mixtures.recipe import (
    MAX_RECIPE_BYTES,
    MAX_RECIPE_DEPTH,
    SCHEDULE_SHAPES,
    RecipeError,
    Schedule,
    load_recipe,
)
from fw_assets.paths import shipped_recipes_dir
from fw_assets_tests.support.curriculum import CURRICULUM
from fw_assets_tests.support.documented_errors import documented_errors


def test_shipped_recipes_load():
    recipes = sorted(shipped_recipes_dir().glob("*.yaml"))
    assert {p.stem for p in recipes} >= {"demo", "fineweb_edu_1t"}
    for path in recipes:
        recipe = load_recipe(path)
        assert recipe.name == path.stem and recipe.phase_stages()


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


def _recipe_file(tmp_path, recipe: dict, stem: str = "mix"):
    path = tmp_path / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


@pytest.mark.parametrize("change, key", [
    (lambda r: r["phases"][0].update(name="../demo/main"), "phases[0].name"),
    (lambda r: r["phases"][0].update(name=".."), "phases[0].name"),
    (lambda r: r["phases"][0].update(name="a/b"), "phases[0].name"),
    (lambda r: r["sources"].update({"../x": r["sources"].pop("top")}), "sources.../x"),
    (lambda r: r.update(tokenizer="../../etc"), "tokenizer"),
    (lambda r: r["sources"].update({"s" * 230: r["sources"].pop("top")}), f"sources.{'s' * 230}"),
    (lambda r: r["phases"][0].update(name="p" * 101), "phases[0].name"),
])
def test_names_that_become_paths_are_refused_when_the_recipe_is_read(tmp_path, change, key):
    recipe = copy.deepcopy(CURRICULUM)
    change(recipe)
    with pytest.raises(RecipeError) as error:
        load_recipe(_recipe_file(tmp_path, recipe))
    assert error.value.key == key and "[A-Za-z0-9]" in error.value.problem and "no path" in error.value.problem
    assert "at most 100 characters" in error.value.problem


@pytest.mark.parametrize("stem", ["..", ".hidden", "-x", "r" * 101])
def test_a_recipe_file_whose_stem_is_not_a_name_is_refused(tmp_path, stem):
    with pytest.raises(RecipeError) as error:
        load_recipe(_recipe_file(tmp_path, CURRICULUM, stem))
    assert error.value.key == "(file name)"


def test_yaml_anchors_and_aliases_are_refused_before_expanding(tmp_path):
    """A billion laughs: nine levels of nine aliases would expand to 10^9 strings."""
    lines = ['a0: &a0 "lol"'] + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecipeError) as error:
        load_recipe(path)
    assert error.value.key == "(file)" and "anchor" in error.value.problem and "line 1" in error.value.problem


def _reweight(**rule):
    return lambda r: r["sources"]["top"].update(reweight={"by": "probe_loss", "max_multiplier": 2.0,
                                                          "drop_top_share": 0.01, **rule})


@pytest.mark.parametrize("change, key, problem", [
    (lambda r: r["phases"][0].update(seq_length=2**31), "phases[0].seq_length", "int32"),
    (lambda r: r["phases"][0].update(tokens=0), "phases[0].tokens", "positive"),
    (lambda r: r["phases"][0].update(tokens=-5), "phases[0].tokens", "positive"),
    (lambda r: r["megatron"].update(global_batch_size=0), "megatron.global_batch_size", "positive"),
    (lambda r: [s.update(weight=0) for s in r["sources"].values()], "sources", "zero"),
    (lambda r: r["phases"][0].update(tokens=10**30, temperature={"from": 2.0, "to": 1.0, "shape": "cosine",
                                                                  "stages": 10**7}),
     "phases[0].temperature.stages", "10,000,000 stages: a schedule has at most 1,000"),
    (_reweight(max_multiplier=0.5), "sources.top.reweight.max_multiplier", "below 1"),
    (_reweight(max_multiplier=1e9), "sources.top.reweight.max_multiplier", "above 4: repeated data"),
    (_reweight(max_multiplier=4.5), "sources.top.reweight.max_multiplier", "above 4: repeated data"),
    (_reweight(drop_top_share=0.5), "sources.top.reweight.drop_top_share", "outside [0, 0.5)"),
    (_reweight(drop_top_share=-0.1), "sources.top.reweight.drop_top_share", "outside [0, 0.5)"),
    (_reweight(by="perplexity"), "sources.top.reweight.by", "'probe_loss'"),
    (_reweight(probe="../models"), "sources.top.reweight.probe", "no path"),
    (_reweight(buckets=["2.8"]), "sources.top.reweight.buckets[0]", "not one of the source's"),
    (_reweight(cap=3), "sources.top.reweight.cap", "unknown key"),
])
def test_absurd_values_are_refused_by_name(tmp_path, change, key, problem):
    recipe = copy.deepcopy(CURRICULUM)
    change(recipe)
    with pytest.raises(RecipeError) as error:
        load_recipe(_recipe_file(tmp_path, recipe))
    assert error.value.key == key and problem in error.value.problem


def test_reweight_defaults_to_the_builtin_probe_and_the_sources_buckets(tmp_path):
    recipe = copy.deepcopy(CURRICULUM)
    _reweight()(recipe)
    top, *others = load_recipe(_recipe_file(tmp_path, recipe)).sources
    assert top.reweight.probe == "builtin" and top.reweight.buckets == top.buckets
    assert top.reweight.max_multiplier == 2.0 and top.reweight.drop_top_share == 0.01
    assert all(s.reweight is None for s in others)


@pytest.mark.parametrize("text", [
    "tokenizer: " + "[" * 5_000 + "]" * 5_000 + "\n",  # flow style: a RecursionError while building it
    "".join(" " * level + f"k{level}:\n" for level in range(300)),  # block style: 48 KB, mostly indentation
    "tokenizer: x\nsources: {a: " + "{b: " * 16 + "1" + "}" * 17 + "\n",
])
def test_a_recipe_nested_too_deep_is_refused_naming_the_file_and_the_limit(tmp_path, text):
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError) as error:
        load_recipe(path)
    assert error.value.path == path and error.value.key == "(file)"
    assert f"more than {MAX_RECIPE_DEPTH} levels deep" in error.value.problem


def test_a_recipe_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "large.yaml"
    path.write_text(yaml.safe_dump(CURRICULUM, sort_keys=False) + "# padding\n" * 20_000)
    with pytest.raises(RecipeError) as error:
        load_recipe(path)
    assert error.value.key == "(file)" and str(path) in str(error.value)
    assert error.value.problem.startswith(f"holds {path.stat().st_size:,} bytes, over the limit of 65,536")


def test_the_limits_leave_room_for_a_real_recipe(tmp_path):
    """Many sources, every dump named: 30 KB, five levels deep."""
    recipe = copy.deepcopy(CURRICULUM)
    dumps = [f"CC-MAIN-{year}-{week:02d}" for year in range(2013, 2025) for week in range(1, 53, 5)]
    recipe["sources"] = {f"s{i}": {"buckets": ["4.0"], "dumps": list(dumps), "weight": 1.0} for i in range(20)}
    recipe["sources"]["s0"]["reweight"] = {"by": "probe_loss", "max_multiplier": 2.0, "drop_top_share": 0.01,
                                           "buckets": ["4.0"]}
    path = _recipe_file(tmp_path, recipe)
    assert 20_000 < path.stat().st_size < MAX_RECIPE_BYTES
    assert len(load_recipe(path).sources) == 20


def test_a_recipe_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path):
    """A FIFO named like a recipe would block a reader (a sensor) until someone writes to it."""
    fifo, folder = tmp_path / "fifo.yaml", tmp_path / "folder.yaml"
    os.mkfifo(fifo)
    folder.mkdir()
    errors = []

    def load(path):
        try:
            load_recipe(path)
        except RecipeError as error:
            errors.append(error)

    reader = threading.Thread(target=lambda: [load(fifo), load(folder)], daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "the reader blocked on the FIFO"
    assert [(e.path, e.key, e.problem) for e in errors] == [
        (fifo, "(file)", "is not a regular file"), (folder, "(file)", "is not a regular file")]


def _dangling(path):
    path.symlink_to(path.with_name("gone.yaml"))


def _padded(path, text):
    path.write_text(text + "#" * (200_011 - len(text)) + "\n")


# The rows whose mistake is the file itself, not a change of the recipe (docs/recipes.md).
FILE_MISTAKES = {
    "`mix.yaml` a link to a missing file": [_dangling],
    "`mix.yaml` a FIFO, or a folder": [os.mkfifo, lambda path: path.mkdir()],
    "`mix.yaml` over 64 KiB (200,012 bytes)": [],  # the recipe padded with a comment
}


@pytest.mark.parametrize("row", [row for row in documented_errors() if not row.planning], ids=str)
def test_every_error_the_recipes_page_shows_is_what_the_loader_says(tmp_path, row):
    """The page's example recipe, changed as the row says (or saved as the file the row says),
    gives the row's message, word for word."""
    makers = FILE_MISTAKES.get(row.mistake)
    if makers is None:
        assert row.changes or row.file_name != "mix.yaml", f"{row}: no change to make"
        makers = [lambda path: path.write_text(row.recipe_text())]
    elif not makers:
        makers = [lambda path: _padded(path, row.recipe_text())]
    for make in makers:
        folder = tmp_path / make.__name__
        folder.mkdir()
        path = folder / row.file_name
        make(path)
        with pytest.raises(RecipeError) as error:
            load_recipe(path)
        assert row.shows(str(error.value)), f"{row}: the page shows\n{row.message}\nthe loader says\n{error.value}"


def test_numbers_are_read_as_people_write_them(tmp_path):
    """YAML 1.2's exponent notation (YAML 1.1 reads `1e12` as text); a whole-number key takes any
    number whose value is whole."""
    text = yaml.safe_dump(CURRICULUM, sort_keys=False)
    for old, new in [("tokens: 8192", "tokens: 1.6e4"), ("vocab_size: 50000", "vocab_size: 5e4"),
                     ("weight: 0.5", "weight: 5e-1"), ("weight: 0.3", "weight: 3E-1"),
                     ("seq_length: 256", "seq_length: 2_56"), ("global_batch_size: 8", "global_batch_size: 8.0")]:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "numbers.yaml"
    path.write_text(text)
    recipe = load_recipe(path)
    long = recipe.phases[2]
    assert (long.tokens, long.seq_length, recipe.megatron.global_batch_size) == (16_000, 256, 8)
    assert all(type(n) is int for n in (long.tokens, long.seq_length, recipe.megatron.global_batch_size))
    assert recipe.megatron.tokenizer_identity["vocab_size"] == "50000"
    assert [s.weight for s in recipe.sources] == [0.5, 0.3, 0.2]
