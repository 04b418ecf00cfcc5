"""The `packed` asset through Dagster on the tokenized sample dumps: for the curriculum, Megatron-Core
finds every stage's cache (builds nothing) and packed rows are its samples; a recipe without
`export: packed` gets nothing, and an earlier export is removed."""


import dagster as dg
import numpy as np
import pyarrow.dataset as ds
import pytest

from fw_assets.lib.publish import recorded_generation
from fw_assets.mixtures.packed import packed
from fw_assets.paths import mixture_cache_dir, packed_dir, packed_root, publication_name
from fw_assets_tests.support.disks import fill_disk, tmpfs
from fw_assets_tests.support.materialized_mixtures import (
    CURRICULUM_NAME,
    build_curriculum,
    curriculum_stages,
    user_recipe,
)
from fw_assets_tests.support.megatron_oracle import megatron_build, megatron_process_group, snapshot
from fw_assets_tests.support.runs import resources
from fw_assets_tests.support.trees import published_tree, writable_copy


@pytest.mark.needs_extra("megatron")
def test_megatron_hits_every_stage_cache_and_packed_rows_are_its_samples(curriculum_built, tmp_path):
    output, result = curriculum_built
    cache = mixture_cache_dir(output, CURRICULUM_NAME)
    before = snapshot(cache)
    (metadata,) = [m.metadata for m in result.asset_materializations_for_node("packed")]
    with megatron_process_group(tmp_path):
        for stage in curriculum_stages(output):
            train = megatron_build(stage, cache)[0]
            assert snapshot(cache) == before, f"Megatron built something for stage {stage.name}"
            rows = ds.dataset(packed_dir(output, CURRICULUM_NAME, stage.name)).head(2).to_pylist()
            for i, row in enumerate(rows):
                assert np.array_equal(row["input_ids"], train[i]["tokens"].numpy())
                assert np.array_equal(row["labels"], train[i]["labels"].numpy())
    assert metadata["rows"].value == sum(s.num_samples[0] for s in curriculum_stages(output))


def test_packed_writes_nothing_for_a_recipe_without_export(curriculum_built, sample_source, tmp_path, monkeypatch):
    output = writable_copy(curriculum_built[0], tmp_path / "output")  # the export is removed: not from the shared run
    user_recipe(tmp_path, monkeypatch, lambda recipe: recipe.pop("export"))
    result = build_curriculum(sample_source, output)
    assert result.success
    assert result.asset_materializations_for_node("packed") == []
    assert not packed_root(output, CURRICULUM_NAME).exists()  # the earlier plan's export is gone


@pytest.mark.e2e
def test_a_full_disk_names_the_path_and_space_and_keeps_the_published_export(curriculum_built, sample_source, tmp_path):
    with tmpfs(tmp_path / "disk", "512m") as disk:
        output = writable_copy(curriculum_built[0], disk / "out")
        before = published_tree(output)
        filler = fill_disk(disk, 256 * 1024)  # room for the plan and indexes, not the export
        result = dg.materialize([packed], partition_key=CURRICULUM_NAME, resources=resources(sample_source, output),
                                raise_on_error=False)
        message = result.failure_data_for_node("packed").user_failure_data.description
        for expected in (f"Recipe {CURRICULUM_NAME}: packed ran out of disk space writing {output}/.staging/",
                         "needs about", "is free now", "the previous output is unchanged"):
            assert expected in message, message
        filler.unlink()
        assert published_tree(output) == before


def test_a_flipped_bit_in_a_planned_token_file_is_refused_naming_the_file(curriculum_built, sample_source, tmp_path):
    output = writable_copy(curriculum_built[0], tmp_path / "output")
    plan = recorded_generation(output, publication_name("packed", CURRICULUM_NAME))
    tokens = recorded_generation(output, next(name for name in plan["inputs"] if name.startswith("tokenized-")))
    relative = next(f for f in tokens["files"] if f.endswith(".bin"))
    data = bytearray((output / relative).read_bytes())
    data[len(data) // 2] ^= 0x04  # one bit of one token: the size, the index and the plan all stay right
    (output / relative).write_bytes(bytes(data))
    before = published_tree(output)
    result = dg.materialize([packed], partition_key=CURRICULUM_NAME, resources=resources(sample_source, output),
                            raise_on_error=False)
    assert not result.success
    message = str(result.get_step_failure_events()[0].step_failure_data.error)
    for expected in (f"{relative} has other bytes than were published (xxh3_128 differs)",
                     f"--select tokenized --partition {tokens['dump']}`", "Nothing was published"):
        assert expected in message, message
    assert published_tree(output) == before
