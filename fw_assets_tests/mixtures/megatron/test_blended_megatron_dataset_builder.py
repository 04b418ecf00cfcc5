"""blended_megatron_dataset_builder.py against Megatron-Core itself: its own builder, pointed at
our cache folder, builds nothing, and builds byte-identical files into an empty one, for one-phase
cases and every stage of a curriculum (on its views); members built in parallel write the same
bytes."""

import filecmp
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fw_assets.formats.doc_index import read_document_index
from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import stage_caches, write_stage_cache
from fw_assets.mixtures.megatron.gpt_dataset import plan_epochs
from fw_assets_tests.support.megatron_oracle import BLEND_CASE, REWEIGHTED_CASE, megatron_build, snapshot
from fw_assets_tests.support.one_phase import plan


def test_case_covers_epochs_and_token_widths(case):
    """The blend case has a source read several times with its final epoch shuffled apart, and
    one read less than once; the int32 case's token files are int32; the reweighted case reads
    `top` through views listing some documents twice, none more, the others plainly."""
    epochs = []
    for cache in stage_caches(case.stage):
        for member, description, (begin, end) in zip(case.stage.members, cache.members, cache.documents):
            lengths = IndexedDatasetReader(Path(member.file.path)).sequence_lengths
            tokens = int(lengths[begin:end].sum())
            plan = plan_epochs(tokens, description["num_samples"], case.stage.seq_length)
            share = description["num_samples"] * case.stage.seq_length / tokens
            epochs.append((cache.split, member.file.source, plan.num_epochs, plan.separate_final_epoch, share))
    if case.spec is BLEND_CASE:
        assert len(case.stage.members) >= 8
        assert len({m.file.dump for m in case.stage.members}) == 3
        assert any(s == "train" and n >= 3 and sep for s, _, n, sep, _ in epochs)
        assert any(s == "train" and src == "low" and share < 1 for s, src, _, _, share in epochs)
        assert {split for split, *_ in epochs} == {"train", "valid", "test"}
    elif case.spec is REWEIGHTED_CASE:
        for member in case.stage.members:
            ids = read_document_index(Path(member.file.path))["id"].to_pylist()
            counts = Counter(ids).values()
            if member.file.source == "top":
                assert "/views/main/4.0/" in member.file.path and max(counts) == 2
            else:
                assert "/views/" not in member.file.path and max(counts) == 1
    else:
        member = IndexedDatasetReader(Path(case.stage.members[0].file.path))
        assert member.dtype == np.int32
        assert {split for split, *_ in epochs} == {"train", "valid"}


@pytest.mark.needs_extra("megatron")
def test_megatron_loads_our_cache_and_builds_nothing(case, process_group):
    before = snapshot(case.ours)
    datasets = megatron_build(case.stage, case.ours)
    assert snapshot(case.ours) == before
    built = [d for d in datasets if d is not None]
    assert [len(d) for d in built] == [sum(c.drawn) for c in stage_caches(case.stage)]


@pytest.mark.needs_extra("megatron")
def test_megatron_builds_the_same_bytes(case, process_group):
    theirs = case.root / "theirs"
    theirs.mkdir(exist_ok=True)
    megatron_build(case.stage, theirs)
    names = sorted(os.listdir(theirs))
    assert names == sorted(os.listdir(case.ours))
    expected = sorted(n for cache in stage_caches(case.stage) for n in cache.file_names())
    assert names == expected
    _, mismatch, errors = filecmp.cmpfiles(theirs, case.ours, names, shallow=False)
    assert mismatch == [] and errors == []


@pytest.mark.needs_extra("megatron")
def test_megatron_hits_every_stage_cache_and_builds_the_same_bytes(curriculum_cache, process_group):
    mixture, ours, root = curriculum_cache
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


def test_parallel_build_writes_the_same_files(tmp_path, output_root):
    """Members built in worker processes while a thread draws the blends: the same bytes."""
    stage = plan(tmp_path, output_root).stages[0]
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    written = write_stage_cache(stage, serial)
    assert sorted(p.name for p in write_stage_cache(stage, parallel, workers=2)) == sorted(p.name for p in written)
    names = sorted(os.listdir(serial))
    assert names == sorted(os.listdir(parallel)) and len(names) == len(written)
    _, mismatch, errors = filecmp.cmpfiles(serial, parallel, names, shallow=False)
    assert mismatch == [] and errors == []
