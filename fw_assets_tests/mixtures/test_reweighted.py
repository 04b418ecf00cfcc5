"""reweighted.py through plan_mixture: a source with `reweight:` is read through views listing each
document as often as its probe loss says (never more than the cap, the top share dropped, held-out
documents kept out of the train split), whole files without fresh documents and within each
stage's fresh subset with them; other sources are untouched; NaN or missing losses are refused by
the source's key."""

import copy
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml

from fw_assets.formats.doc_index import read_document_index
from fw_assets.mixtures.contract import reweight_outcomes
from fw_assets.mixtures.plan import plan_mixture
from fw_assets.mixtures.recipe import RecipeError, load_recipe
from fw_assets.mixtures.views import seeded_order, write_views
from fw_assets.paths import token_prefix
from fw_assets.settings import MAX_DISK_ENV, MAX_MEMORY_ENV
from fw_assets_tests.support import curriculum
from fw_assets_tests.support.curriculum import CURRICULUM, train_ids, view_ids
from fw_assets_tests.support.megatron_oracle import DUMPS, REWEIGHTED_CASE, TOKENIZER, synthetic_losses
from fw_assets_tests.support.token_trees import document_lengths, write_token_file

RULE = {"by": "probe_loss", "max_multiplier": 2.0, "drop_top_share": 0.05}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("reweighted")
    rng = np.random.default_rng(3)
    for bucket, documents in REWEIGHTED_CASE.documents.items():
        for dump in DUMPS:
            write_token_file(root / "out", TOKENIZER, bucket, dump, document_lengths(rng, documents, 40), 50_000, rng)
    return root


def _plan(root, recipe, read_losses, name="reweighted"):
    """The plan of `recipe` (as `<name>.yaml`) over the tree, its views written."""
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    mixture = plan_mixture(load_recipe(path), root / "out", DUMPS, read_losses)
    write_views(mixture.views)
    return mixture


def _ids(weighting) -> list[str]:
    """The reweighted source's document ids, in the order of its losses and repetitions."""
    return [i for f in weighting.files for i in read_document_index(Path(f.path))["id"].to_pylist()]


def _recipe(case=REWEIGHTED_CASE) -> dict:
    return {"tokenizer": TOKENIZER, "sources": copy.deepcopy(case.sources),
            "phases": [{"name": "main", "tokens": case.tokens, "seq_length": case.seq_length}],
            "megatron": {"seed": case.seed, "split": case.split, "global_batch_size": 32, "eval_interval": 50,
                         "eval_iters": 2, "tokenizer": {"type": "NullTokenizer", "vocab_size": 50_000}}}


def test_a_reweighted_source_lists_high_loss_documents_up_to_the_cap_and_others_plainly(tree):
    read = synthetic_losses(tree / "out", REWEIGHTED_CASE.documents)
    mixture = _plan(tree, _recipe(), read)
    (weighting,) = mixture.reweighted
    ids = _ids(weighting)
    loss_of = dict(zip(ids, weighting.losses))
    dropped = {i for i, gone in zip(ids, weighting.weighting.dropped) if gone}
    assert len(dropped) == int(0.05 * len(ids))
    counts: Counter = Counter()
    for selection in mixture.views:
        assert selection.file.source == "top" and "/views/main/4.0/" in selection.view.path
        train, held = train_ids(selection), view_ids(selection, slice(selection.train_documents, None))
        assert not set(train) & set(held), "no held-out document is trained on"
        assert not (set(train) | set(held)) & dropped
        counts.update(train)
    assert max(counts.values()) == 2 and min(counts.values()) == 1
    twice = [loss_of[i] for i, n in counts.items() if n == 2]
    once = [loss_of[i] for i, n in counts.items() if n == 1]
    assert len(twice) > 10 and np.mean(twice) > np.mean(once)
    assert max(once) < min(loss_of[i] for i in dropped)
    plain = [m.file for m in mixture.stages[0].members if m.file.source != "top"]
    assert plain and all("/views/" not in f.path for f in plain)
    assert all(o.passed for o in reweight_outcomes(mixture))


def test_a_recipe_without_reweight_plans_as_before(tree):
    recipe = _recipe()
    del recipe["sources"]["top"]["reweight"]
    before = _plan(tree, recipe, None, "plain")
    assert not before.views and not before.reweighted
    assert all(o.passed and not o.figures for o in reweight_outcomes(before))


def test_a_nan_loss_is_refused_naming_the_source_and_the_ids(tree):
    read = synthetic_losses(tree / "out", REWEIGHTED_CASE.documents)

    def with_nan(probe, dump, bucket):
        table = pa.Table.from_batches(read(probe, dump, bucket))
        losses = table.column("loss").to_numpy().copy()
        losses[3] = np.nan
        return table.set_column(1, "loss", pa.array(losses)).to_batches()

    with pytest.raises(RecipeError) as error:
        _plan(tree, _recipe(), with_nan)
    assert error.value.key == "sources.top.reweight"
    assert "NaN or infinite loss (ids <urn:uuid:4.0-CC-MAIN-2013-20-000003>" in error.value.problem


def test_documents_the_probe_did_not_score_are_refused_naming_the_dump_and_how_many(tree):
    read = synthetic_losses(tree / "out", REWEIGHTED_CASE.documents)

    def missing_some(probe, dump, bucket):
        table = pa.Table.from_batches(read(probe, dump, bucket))
        return (table.slice(7) if dump == DUMPS[1] else table).to_batches()

    with pytest.raises(RecipeError) as error:
        _plan(tree, _recipe(), missing_some)
    assert error.value.key == "sources.top.reweight"
    assert f"Dump {DUMPS[1]}: the probe has no loss for 7 rows of the source's" in error.value.problem


def test_losses_the_probe_never_published_are_refused_naming_the_dump(tree):
    def none(probe, dump, bucket):
        raise ValueError(f"Dump {dump}: probe {probe} has no published losses.")

    with pytest.raises(RecipeError) as error:
        _plan(tree, _recipe(), none)
    assert error.value.key == "sources.top.reweight" and f"Dump {DUMPS[0]}: probe builtin" in error.value.problem


def test_with_fresh_documents_reweighting_applies_within_each_stages_fresh_subset(tmp_path):
    output = curriculum.write_tree(tmp_path / "out", {"4.0": 1_500, "3.5": 1_500, "3.0": 1_500})
    recipe = copy.deepcopy(CURRICULUM)
    recipe["sources"]["top"]["reweight"] = RULE

    def read(probe, dump, bucket):
        ids = read_document_index(token_prefix(output, "synthetic", bucket, dump))["id"]
        rng = np.random.default_rng([5, curriculum.DUMPS.index(dump)])
        return pa.table({"id": ids, "loss": rng.lognormal(np.log(5.0), 0.3, len(ids))}).to_batches()

    path = tmp_path / "curriculum.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    mixture = plan_mixture(load_recipe(path), output, curriculum.DUMPS, read)
    write_views(mixture.views)
    (weighting,) = mixture.reweighted
    repetitions = dict(zip(_ids(weighting), weighting.weighting.repetitions.tolist()))
    seen: set = set()
    for stage in mixture.stages:
        mine = [s for s in mixture.views if s.stage == stage.name and s.file.source == "top"]
        counts = Counter(i for s in mine for i in train_ids(s))
        assert all(repetitions[i] > 0 for i in counts), "a dropped document is in no view"
        assert all(n <= repetitions[i] for i, n in counts.items()), "each at most its repetitions in one pass"
        assert any(n == 2 for n in counts.values())
        assert not seen & set(counts), "stages still read fresh documents while there are unread ones"
        seen |= set(counts)
    assert all(o.passed for o in reweight_outcomes(mixture))


@pytest.mark.parametrize("env, what", [(MAX_DISK_ENV, "disk"), (MAX_MEMORY_ENV, "memory")])
def test_reweighted_views_count_against_the_limits_before_any_is_listed(tree, monkeypatch, env, what):
    """The views listing each document its repetitions times are counted, by the source's key,
    before any is built: a limit they exceed refuses the plan there, not after allocating them."""
    monkeypatch.setenv(env, "0.000001")  # 1 KiB: less than the views' entries, more than nothing
    with pytest.raises(RecipeError) as error:
        _plan(tree, _recipe(), synthetic_losses(tree / "out", REWEIGHTED_CASE.documents))
    assert error.value.key == "sources.top.reweight", error.value
    assert f"of {what} for the views listing its documents as often as the reweighting says" in error.value.problem
    assert f"({env})" in error.value.problem


def test_a_drop_that_leaves_no_held_out_document_is_refused_by_the_drop_not_the_split(tree):
    """The highest losses are the files' held-out documents (their last 10 %, split 90,5,5): a drop
    of the top 20 % leaves the validation split of the views empty. The drop is at fault."""
    def read(probe: str, dump: str, bucket: str) -> list[pa.RecordBatch]:
        ids = read_document_index(token_prefix(tree / "out", TOKENIZER, "4.0", dump))["id"].combine_chunks()
        position = np.arange(len(ids))
        losses = np.where(position >= 0.9 * len(ids), 9.0, 5.0 + position * 1e-3)
        return pa.table({"id": ids, "loss": losses}).to_batches()

    recipe = _recipe()
    recipe["sources"]["top"]["reweight"]["drop_top_share"] = 0.2
    with pytest.raises(RecipeError) as error:
        _plan(tree, recipe, read)
    assert error.value.key == "sources.top.reweight.drop_top_share", error.value
    assert "the drop of the top 20% by loss left no held-out document" in error.value.problem
    assert "lower drop_top_share" in error.value.problem


def test_with_fresh_documents_a_drop_that_leaves_no_held_out_document_is_refused_by_the_drop(tmp_path):
    """Fresh documents hold out by a seeded rank, not by position: the highest losses are those."""
    root = tmp_path / "fresh"
    curriculum.write_tree(root / "out", {"4.0": 300, "3.5": 600, "3.0": 600})
    recipe = copy.deepcopy(CURRICULUM)
    recipe["sources"]["top"]["reweight"] = {**RULE, "drop_top_share": 0.2}
    seed = recipe["megatron"]["seed"]

    def read(probe: str, dump: str, bucket: str) -> list[pa.RecordBatch]:
        prefix = token_prefix(root / "out", "synthetic", "4.0", dump)
        ids = read_document_index(prefix)["id"]
        ranks = np.empty(len(ids), np.int64)
        ranks[seeded_order(prefix, seed)] = np.arange(len(ids))
        return pa.table({"id": ids, "loss": np.where(ranks >= 0.9 * len(ids), 9.0, 5.0 + ranks * 1e-3)}).to_batches()

    (root / "fresh.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    with pytest.raises(RecipeError) as error:
        plan_mixture(load_recipe(root / "fresh.yaml"), root / "out", curriculum.DUMPS, read)
    assert error.value.key == "sources.top.reweight.drop_top_share", error.value
    assert "the drop of the top 20% by loss left no held-out document" in error.value.problem
