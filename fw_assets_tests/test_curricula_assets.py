"""The shipped curriculum recipe through Dagster on real tokenized sample dumps: mixture_plan
publishes every stage's views and the shares picture, the curriculum checks land on the recipe's
partition, Megatron-Core finds every stage's cache (builds nothing), and `packed` writes
Megatron's samples only for a recipe that asks for them."""

import json

import dagster as dg
import numpy as np
import pyarrow.dataset as ds
import pytest
import yaml

from fw_assets.layout import (
    generation_record_path,
    mixture_cache_dir,
    packed_dir,
    packed_root,
    plan_path,
    publication_name,
    report_path,
    shares_picture_path,
    shipped_recipes_dir,
    views_dir,
)
from fw_assets.lib.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.megatron_indexes import megatron_indexes
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.mixtures.packed import packed
from fw_assets.mixtures.plan import stage_from_plan_json
from fw_assets.settings import MIXTURES_DIR_ENV
from fw_assets_tests.helpers import resources
from fw_assets_tests.test_mixtures_assets import check_evaluations, tokenized_output  # noqa: F401

RECIPE_NAME = "curriculum"  # fw_assets/mixtures/curriculum.yaml: three phases, six stages, views, export: packed
CONFIG = {"ops": {"megatron_indexes": {"config": {"workers": 1}}}}


def build(source, output):
    return dg.materialize([mixture_plan, megatron_indexes, packed], partition_key=RECIPE_NAME,
                          resources=resources(source, output), run_config=CONFIG, raise_on_error=False)


def stages(output):
    plan = json.loads(plan_path(output, RECIPE_NAME).read_text())
    return [stage_from_plan_json(plan, s["name"]) for phase in plan["phases"] for s in phase["stages"]]


@pytest.fixture(scope="module")
def built(sample_source, tokenized_output):  # noqa: F811
    result = build(sample_source, tokenized_output)
    assert result.success
    return tokenized_output, result


def test_views_are_published_with_the_plan(built):
    output, _ = built
    record = json.loads(generation_record_path(output, publication_name("mixture_plan", RECIPE_NAME)).read_text())
    for stage in stages(output):
        assert stage.members and all(m.file.path.startswith(str(views_dir(output, RECIPE_NAME) / stage.name))
                                     for m in stage.members)
        for member in stage.members:
            view = IndexedDatasetReader(member.file.path)  # its .bin link resolves to the token file
            assert len(view.sequence_lengths) > 0 and view[0].size == view.sequence_lengths[0]
            idx = str(member.file.path).removeprefix(f"{output}/") + ".idx"
            assert idx in record["files"]
    long = [s for s in stages(output) if s.name == "long"][0]
    assert all(IndexedDatasetReader(m.file.path).sequence_lengths.min() >= 256 for m in long.members)


def test_report_picture_and_checks_on_the_recipe_partition(built):
    output, result = built
    (metadata,) = [m.metadata for m in result.asset_materializations_for_node("mixture_plan")]
    picture = shares_picture_path(output, RECIPE_NAME)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.parent == plan_path(output, RECIPE_NAME).parent
    assert metadata["shares"].value.startswith("![") and "(data:image/png;base64," in metadata["shares"].value
    assert metadata["shares_png"].value == str(picture)
    report = report_path(output, RECIPE_NAME).read_text()
    assert "## Sources over training" in report and "| explore-1 | top |" in report
    evaluations = check_evaluations(result)
    curriculum = {"max_epochs", "phase_epochs", "repeats_while_unseen"}
    assert curriculum <= set(evaluations)
    assert all(evaluations[name].partition == RECIPE_NAME for name in curriculum)
    assert evaluations["max_epochs"].passed and evaluations["max_epochs"].severity == dg.AssetCheckSeverity.ERROR
    assert evaluations["phase_epochs"].passed
    # The sample dumps' bucket 4.0 is small: `top` (weight 0.5) is read again from refine on while
    # mid and rest have unread documents. A warning: the plan is still published.
    repeats = evaluations["repeats_while_unseen"]
    assert not repeats.passed and repeats.severity == dg.AssetCheckSeverity.WARN
    problems = repeats.metadata["problems"].value
    assert [p.removeprefix("file plan.json: ").split(":")[0] for p in problems] == ["refine-1", "refine-2", "long"]
    assert "- repeats_while_unseen: WARNING" in report


def test_megatron_hits_every_stage_cache_and_packed_rows_are_its_samples(built, tmp_path):
    pytest.importorskip("megatron.core", reason="megatron-core (the `megatron` extra) is the oracle")
    from fw_assets_tests.test_mixtures_assets import megatron_process_group
    from fw_assets_tests.test_mixtures_megatron import megatron_build, snapshot

    output, result = built
    cache = mixture_cache_dir(output, RECIPE_NAME)
    before = snapshot(cache)
    (metadata,) = [m.metadata for m in result.asset_materializations_for_node("packed")]
    with megatron_process_group(tmp_path):
        for stage in stages(output):
            train = megatron_build(stage, cache)[0]
            assert snapshot(cache) == before, f"Megatron built something for stage {stage.name}"
            rows = ds.dataset(packed_dir(output, RECIPE_NAME, stage.name)).head(2).to_pylist()
            for i, row in enumerate(rows):
                assert np.array_equal(row["input_ids"], train[i]["tokens"].numpy())
                assert np.array_equal(row["labels"], train[i]["labels"].numpy())
    assert metadata["rows"].value == sum(s.num_samples[0] for s in stages(output))


def user_recipe(folder, monkeypatch, change) -> None:
    """The shipped curriculum, changed by `change`, as the user's recipe of the same name."""
    recipe = yaml.safe_load((shipped_recipes_dir() / f"{RECIPE_NAME}.yaml").read_text())
    change(recipe)
    (folder / f"{RECIPE_NAME}.yaml").write_text(yaml.safe_dump(recipe))
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(folder))


def test_a_phase_read_beyond_max_epochs_blocks_the_plan(built, sample_source, tmp_path, monkeypatch):
    output, _ = built
    published = {p: p.read_bytes() for p in (plan_path(output, RECIPE_NAME), shares_picture_path(output, RECIPE_NAME))}
    user_recipe(tmp_path, monkeypatch, lambda recipe: recipe["phases"][1].update(max_epochs=0.05))
    result = build(sample_source, output)
    assert not result.success
    max_epochs = check_evaluations(result)["max_epochs"]
    assert not max_epochs.passed and max_epochs.severity == dg.AssetCheckSeverity.ERROR
    assert max_epochs.partition == RECIPE_NAME
    assert all(p.removeprefix("file plan.json: ").split(":")[0].endswith(" in refine")
               for p in max_epochs.metadata["problems"].value)
    assert {p: p.read_bytes() for p in published} == published  # nothing published changed


def test_packed_writes_nothing_for_a_recipe_without_export(built, sample_source, tmp_path, monkeypatch):
    output, _ = built
    user_recipe(tmp_path, monkeypatch, lambda recipe: recipe.pop("export"))
    result = build(sample_source, output)
    assert result.success
    assert result.asset_materializations_for_node("packed") == []
    assert not packed_root(output, RECIPE_NAME).exists()  # the earlier plan's export is gone
