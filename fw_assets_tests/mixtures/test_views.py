"""views.py: fresh documents, each stage's own view of every token file: disjoint while unread
documents remain, one epoch long, held-out documents never trained on, reused evenly when scarce,
drawn by id and seed."""

import copy
import hashlib
import math
import os
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa

from fw_assets.formats import indexed_dataset
from fw_assets.formats.doc_index import DocumentIndexWriter, read_document_index
from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures import views
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import split_documents
from fw_assets.mixtures.megatron.blended_megatron_dataset_config import split_matrix
from fw_assets.mixtures.views import seeded_order, write_views
from fw_assets.paths import token_files, token_prefix, views_dir
from fw_assets_tests.support.curriculum import (
    CURRICULUM,
    DUMPS,
    member_samples,
    plan,
    train_ids,
    view_ids,
    write_tree,
)
from fw_assets_tests.support.token_trees import document_lengths, write_token_file


def test_views_are_fresh_and_one_epoch_long(tmp_path, plenty):
    mixture = plan(tmp_path, plenty)
    written = write_views(mixture.views)
    assert all(p.exists() for p in written)
    trained: dict[tuple[str, str], set[str]] = {}
    evaluated: dict[tuple[str, str], set[str]] = {}
    for selection in mixture.views:
        bin_file = Path(selection.view.path + ".bin")
        assert bin_file.samefile(selection.file.path + ".bin")  # the planned tokens themselves
        ids = train_ids(selection)
        key = (selection.file.bucket, selection.file.dump)
        assert not trained.setdefault(key, set()) & set(ids), f"{selection.stage} rereads {key}"
        trained[key] |= set(ids)
        evaluated.setdefault(key, set()).update(view_ids(selection, slice(selection.train_documents, None)))
        assert selection.seen_before == 0 and not selection.repeats
    # validation documents are held out: no stage trains on what another evaluates on
    assert all(evaluated[key] and not evaluated[key] & trained[key] for key in trained)
    for stage in mixture.stages:
        bounds = split_matrix(stage.cache.split)[0]
        for member, samples, selection in zip(stage.members, member_samples(stage),
                                              [s for s in mixture.views if s.stage == stage.name]):
            reader = IndexedDatasetReader(Path(member.file.path))
            begin, end = split_documents(bounds, len(reader))
            assert end == selection.train_documents  # Megatron's train split is the view's train part
            assert reader.sequence_lengths[begin:end].sum() >= samples * stage.seq_length + 1
            original = IndexedDatasetReader(Path(selection.file.path))
            ids = read_document_index(Path(member.file.path))["id"].to_pylist()
            numbers = [int(i.rsplit("-", 1)[1].rstrip(">")) for i in ids]
            assert [np.array_equal(reader[k], original[n]) for k, n in enumerate(numbers)] == [True] * len(ids)


def test_views_staged_elsewhere_link_from_their_place(tmp_path, plenty):
    """Written into a staging folder and moved into place (publish by rename), views read the same."""
    mixture = plan(tmp_path, plenty)
    staging = plenty / ".staging" / "views-test"
    write_views(mixture.views, staging)
    final = views_dir(plenty, "curriculum")
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    for selection in mixture.views:
        reader = IndexedDatasetReader(Path(selection.view.path))
        original = IndexedDatasetReader(Path(selection.file.path))
        assert [np.array_equal(reader[k], original[int(d)]) for k, d in enumerate(selection.documents)] == \
            [True] * len(selection.documents)


def test_views_written_a_few_documents_at_a_time_are_the_same_bytes(tmp_path, plenty, monkeypatch):
    """A view's index and ids are written in chunks (a view of a real dump lists millions): chunk
    edges anywhere, even inside one row group of ids, leave every file the same bytes."""
    mixture = plan(tmp_path, plenty)
    whole = {p.relative_to(tmp_path / "whole"): p.read_bytes() for p in write_views(mixture.views, tmp_path / "whole")}
    monkeypatch.setattr(views, "_IDS_CHUNK", 7)
    monkeypatch.setattr(indexed_dataset, "_INDEX_WRITE_CHUNK", 5)
    chunked = {p.relative_to(tmp_path / "chunked"): p.read_bytes()
               for p in write_views(mixture.views, tmp_path / "chunked")}
    assert chunked.keys() == whole.keys() and all(chunked[name] == whole[name] for name in whole)


def test_min_doc_tokens_keeps_long_documents(tmp_path, plenty):
    mixture = plan(tmp_path, plenty)
    write_views(mixture.views)
    long = [s for s in mixture.views if s.stage == "long"]
    assert long
    for selection in long:
        assert IndexedDatasetReader(Path(selection.view.path)).sequence_lengths.min() >= 80
    short = [s for s in mixture.views if s.stage == "explore-1"]
    assert min(IndexedDatasetReader(Path(s.view.path)).sequence_lengths.min() for s in short) < 80


def test_scarce_documents_are_reused_evenly(tmp_path, scarce):
    recipe = copy.deepcopy(CURRICULUM)
    del recipe["phases"][2]["min_doc_tokens"]
    mixture = plan(tmp_path, scarce, recipe)
    write_views(mixture.views)
    for dump in DUMPS:
        selections = [s for s in mixture.views if s.file.bucket == "4.0" and s.file.dump == dump]
        lengths = IndexedDatasetReader(Path(selections[0].file.path)).sequence_lengths
        uses = Counter(i for s in selections for i in train_ids(s))
        reader = IndexedDatasetReader(Path(selections[0].view.path))
        demand = sum(int(IndexedDatasetReader(Path(s.view.path)).sequence_lengths[:s.train_documents].sum())
                     for s in selections)
        supply = selections[0].eligible_tokens
        assert reader.document_count and demand > 2 * supply  # the case needs reuse
        assert max(uses.values()) <= math.ceil(demand / supply)
        assert len(uses) == selections[0].eligible_documents < len(lengths)  # all read before any again
        assert max(uses.values()) - min(uses.values()) <= 1
        assert selections[0].seen_before == 0 and selections[-1].seen_before > 0


def test_views_are_drawn_by_id_and_seed(tmp_path, plenty):
    first, again = plan(tmp_path, plenty), plan(tmp_path, plenty)
    assert all(np.array_equal(a.documents, b.documents) for a, b in zip(first.views, again.views))
    recipe = copy.deepcopy(CURRICULUM)
    recipe["megatron"]["seed"] = 10
    other = plan(tmp_path, plenty, recipe)
    assert not np.array_equal(first.views[0].documents, other.views[0].documents)


def test_views_keep_the_tokens_they_were_planned_on_after_a_retokenize(tmp_path):
    """A dump re-tokenized with other decisions is published by rename over the token files the
    plan read (as `tokenized` publishes): every view document still reads the planned tokens."""
    root = write_tree(tmp_path / "out", {"4.0": 600, "3.5": 600, "3.0": 600})
    mixture = plan(tmp_path, root)
    write_views(mixture.views)
    planned = {}
    for selection in mixture.views:
        reader = IndexedDatasetReader(Path(selection.file.path))
        planned.setdefault(selection.file.path, [np.array(reader[d]) for d in range(len(reader))])
    rng = np.random.default_rng(11)
    for bucket in ("3.0", "3.5", "4.0"):
        staged = write_token_file(tmp_path / "retokenized", "synthetic", bucket, DUMPS[0],
                                  document_lengths(rng, 500, 40), 50_000, rng)
        for new, old in zip(token_files(staged), token_files(token_prefix(root, "synthetic", bucket, DUMPS[0]))):
            os.replace(new, old)
    for selection in mixture.views:
        reader = IndexedDatasetReader(Path(selection.view.path))
        tokens = planned[selection.file.path]
        assert all(np.array_equal(reader[k], tokens[d]) for k, d in enumerate(selection.documents)), selection.view.path


def test_a_file_s_seeded_order_is_by_the_blake2b_of_seed_and_id_as_python_computes_it(tmp_path):
    rng = np.random.default_rng(2)
    ids = [f"<urn:uuid:{rng.integers(1 << 62):016x}>" for _ in range(300_000)] + ["<urn:uuid:same>"] * 3
    with DocumentIndexWriter(tmp_path / "file") as docs:
        docs.add(pa.array(ids), np.ones(len(ids), np.int32))
    keys = [hashlib.blake2b(f"1234\x00{i}".encode(), digest_size=8).digest() for i in ids]
    expected = np.frombuffer(b"".join(keys), dtype=">u8").argsort(kind="stable")
    assert seeded_order(tmp_path / "file", 1234).tolist() == expected.tolist()
