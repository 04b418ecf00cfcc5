"""partitions.py: one partition per recipe, a user's recipe replacing a shipped one of its name,
and the mixture assets in a group of their own, out of the per-dump chain."""

import logging

import dagster as dg

from bench.dagster_services import chain_asset_keys
from fw_assets.bucketing.raw import raw
from fw_assets.definitions import defs
from fw_assets.mixtures.megatron_indexes import megatron_indexes
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.mixtures.partitions import recipe_files
from fw_assets.partitions import dump_partitions
from fw_assets.paths import shipped_recipes_dir
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.materialized_mixtures import RECIPE, write_recipe


def test_recipes_are_partitions_and_a_user_recipe_replaces_a_shipped_one(tmp_path, caplog):
    shipped = recipe_files(shipped_recipes_dir(), None)
    assert {"demo", "fineweb_edu_1t"} <= set(shipped)
    assert set(shipped) <= set(mixture_plan.partitions_def.get_partition_keys())
    write_recipe(tmp_path, RECIPE)
    (tmp_path / "extra.yaml").write_text("tokenizer: x\n")
    with caplog.at_level(logging.WARNING):
        found = recipe_files(shipped_recipes_dir(), tmp_path)
    assert found["demo"] == tmp_path / "demo.yaml" and found["extra"] == tmp_path / "extra.yaml"
    assert "replaces the shipped recipe" in caplog.text


def test_the_mixture_assets_stay_out_of_the_dump_chain():
    chain = set(chain_asset_keys())
    assert {raw.key, tokenized.key} <= chain
    assert not {mixture_plan.key, megatron_indexes.key} & chain
    for key in chain:
        assert defs.resolve_assets_def(key).partitions_def == dump_partitions
    for asset in (mixture_plan, megatron_indexes):
        assert asset.group_names_by_key[asset.key] == "mixtures"
        assert asset.partitions_def != dump_partitions
        mapping = asset.get_partition_mapping(tokenized.key)
        assert isinstance(mapping, dg.AllPartitionMapping)


def test_a_recipe_file_named_like_a_path_is_not_made_a_partition(tmp_path, caplog):
    """Names are matched whole and in ASCII: a trailing newline or another script's letters are no name."""
    write_recipe(tmp_path, RECIPE)
    odd = ["..", "mix\n", "ｍix", "mïx"]
    for stem in odd:
        (tmp_path / f"{stem}.yaml").write_text("tokenizer: x\n")
    with caplog.at_level(logging.WARNING):
        found = recipe_files(shipped_recipes_dir(), tmp_path)
    assert not set(odd) & set(found) and found["demo"] == tmp_path / "demo.yaml"
    assert all(f"Recipe {f'{stem}.yaml'!r} in {tmp_path} is not loaded" in caplog.text for stem in odd), caplog.text
