"""A curriculum's stages against Megatron-Core itself: on the stages' views, its builder finds
every cache file (builds nothing) and builds the same bytes; every view needs one epoch of its
GPTDataset; packed rows are its `BlendedDataset[i]`."""

import filecmp
import json
import os
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest

from fw_assets.layout import packed_dir
from fw_assets.lib.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.cache import stage_caches, write_stage_cache
from fw_assets.mixtures.explain import explain_sample
from fw_assets.mixtures.packing import write_packed
from fw_assets.mixtures.plan import stage_from_plan_json
from fw_assets.mixtures.views import write_views
from fw_assets_tests.test_curricula_plan import CURRICULUM, plan, write_tree
from fw_assets_tests.test_mixtures_megatron import megatron_build, process_group, snapshot  # noqa: F401

pytest.importorskip("megatron.core", reason="megatron-core (the `megatron` extra) is the oracle of these tests")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The curriculum planned over a small tree, its views written and every stage's cache built."""
    root = tmp_path_factory.mktemp("curriculum")
    output = write_tree(root / "out", {"4.0": 400, "3.5": 1_000, "3.0": 1_500})
    mixture = plan(root, output, CURRICULUM)
    write_views(mixture)
    cache = root / "ours"
    for stage in mixture.stages:
        write_stage_cache(stage, cache)
    return mixture, cache, root


def test_megatron_hits_every_stage_cache_and_builds_the_same_bytes(built, process_group):
    mixture, ours, root = built
    assert len(mixture.stages) == 6
    for stage in mixture.stages:
        before = snapshot(ours)
        megatron_build(stage, ours)
        assert snapshot(ours) == before, f"Megatron built something for stage {stage.name}"
        theirs = root / f"theirs-{stage.name}"
        theirs.mkdir()
        megatron_build(stage, theirs)
        names = sorted(os.listdir(theirs))
        assert names == sorted(n for cache in stage_caches(stage) for n in cache.file_names())
        _, mismatch, errors = filecmp.cmpfiles(theirs, ours, names, shallow=False)
        assert mismatch == [] and errors == []


def test_each_view_needs_one_epoch_of_megatrons_gptdataset(built, process_group):
    mixture, ours, _ = built
    for stage in mixture.stages:
        train = megatron_build(stage, ours)[0]
        for member, dataset in zip(stage.members, train.datasets):
            assert dataset.dataset.path_prefix == member.file.path
            assert len(dataset.document_index) == len(dataset.indices), (stage.name, member.file.path)


def test_packed_rows_are_megatrons_samples(built, process_group):
    mixture, ours, root = built
    for stage in (mixture.stages[0], mixture.stages[-1]):
        folder = packed_dir(root / "out", "curriculum", stage.name)
        files = write_packed(stage, ours, folder, rows_per_file=24)
        assert len(files) > 1 and [f.name for f in files] == sorted(f.name for f in files)
        table = ds.dataset(str(folder), format="parquet").to_table()
        blended = megatron_build(stage, ours)[0]
        assert table.num_rows == stage.num_samples[0] <= len(blended)
        for i in range(table.num_rows):
            item = blended[i]
            row = {k: table[k][i].as_py() for k in ("input_ids", "labels", "documents")}
            assert row["input_ids"] == item["tokens"].tolist()
            assert row["labels"] == item["labels"].tolist()
            assert len(row["input_ids"]) == stage.seq_length and row["documents"][0] == 0
            eod = 50_000 - 1
            # a new document starts right after each end-of-document token of the inputs
            assert row["documents"][1:] == [k + 1 for k, t in enumerate(row["input_ids"][:-1]) if t == eod]


def test_explain_names_source_ids_through_the_views(built, process_group):
    mixture, ours, _ = built
    written = json.loads(json.dumps(mixture.to_json()))
    for name in ("explore-2", "long"):
        stage = stage_from_plan_json(written, name)
        assert stage == mixture.stage(name)
        blended = megatron_build(stage, ours)[0]
        for n in (0, 7, len(blended) - 1):
            explained = explain_sample(stage, ours, "train", n)
            member = stage.members[int(blended[n]["dataset_id"])].file
            assert explained["dataset"] == member.prefix and f"/views/{name}/" in member.prefix
            original = IndexedDatasetReader(Path(member.path.replace(f"mixtures/curriculum/views/{name}", "tokenized/synthetic")))
            pieces = []
            for d in explained["documents"]:
                # the id names the original document; its tokens are the view's document's
                number = int(d["id"].rsplit("-", 1)[1].rstrip(">"))
                assert d["id"].startswith(f"<urn:uuid:{member.bucket}-{member.dump}-")
                pieces.append(original[number][d["offset"]: d["offset"] + d["length"]])
            item = blended[n]
            assert np.array_equal(np.concatenate(pieces), np.concatenate([item["tokens"].numpy(), item["labels"].numpy()[-1:]]))
