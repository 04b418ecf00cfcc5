"""Capped loss-based reweighting: the cap, the floor, the dropped top share, deterministic whole
repetitions keyed on id and seed (the hashes computed over Arrow buffers equal xxhash's of
f"{seed}:{id}", the repetitions the rule's as written with Python strings), and the refusals."""

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from fw_assets.mixtures.reweighting import ReweightingRefused, aligned_losses, repetition_hashes
from fw_assets.mixtures.reweighting import reweight as reweight_hashed

IDS = [f"<urn:uuid:{i:08d}>" for i in range(2_000)]
LOSSES = np.random.default_rng(3).gamma(9.0, 0.5, len(IDS))


def reweight(ids, losses, max_multiplier, drop_top_share, seed):
    """The rule over ids held in a list."""
    return reweight_hashed(losses, repetition_hashes(pa.array(ids, pa.string()), seed), max_multiplier,
                           drop_top_share, lambda positions: [ids[i] for i in np.asarray(positions).tolist()])


def rule_as_written(ids, losses, max_multiplier, drop_top_share, seed):
    """The rule's repetitions and its highest-loss order, one Python string and hash a document."""
    typical = float(np.median(losses))
    multipliers = np.clip(losses / typical, 1.0, max_multiplier)
    by_loss = np.lexsort((np.asarray(ids, dtype=object).astype(str), -losses))
    whole = np.floor(multipliers)
    uniforms = np.array([xxhash.xxh64_intdigest(f"{seed}:{i}".encode()) for i in ids], np.uint64) / 2.0**64
    repetitions = (whole + (uniforms < multipliers - whole)).astype(np.int64)
    repetitions[by_loss[: int(np.floor(drop_top_share * len(losses)))]] = 0
    return repetitions, by_loss


def test_multipliers_grow_with_loss_and_stay_between_one_and_the_cap():
    result = reweight(IDS, LOSSES, max_multiplier=2.0, drop_top_share=0.0, seed=1)
    multipliers = result.multipliers_in_place(LOSSES.copy())
    assert multipliers.min() == 1.0 and multipliers.max() == 2.0
    order = np.argsort(LOSSES)
    assert (np.diff(multipliers[order]) >= 0).all(), "a higher loss never gets a lower multiplier"
    assert (LOSSES[multipliers > 1] > result.typical_loss).all()
    assert result.typical_loss == np.median(LOSSES)


def test_repetitions_are_whole_at_most_the_cap_and_average_the_multiplier():
    result = reweight(IDS, LOSSES, max_multiplier=2.5, drop_top_share=0.0, seed=1)
    multipliers = result.multipliers_in_place(LOSSES.copy())
    assert set(np.unique(result.repetitions)) <= {1, 2, 3}
    assert (result.repetitions >= np.floor(multipliers)).all()
    assert (result.repetitions <= np.ceil(multipliers)).all()
    assert abs(result.repetitions.sum(dtype=np.int64) - multipliers.sum()) < 0.05 * len(IDS)


def test_repetitions_depend_only_on_id_loss_and_seed():
    one = reweight(IDS, LOSSES, 2.0, 0.01, seed=7)
    order = np.random.default_rng(0).permutation(len(IDS))
    shuffled = reweight([IDS[i] for i in order], LOSSES[order], 2.0, 0.01, seed=7)
    assert (shuffled.repetitions == one.repetitions[order]).all()
    assert (reweight(IDS, LOSSES, 2.0, 0.01, seed=8).repetitions != one.repetitions).any()


def test_the_top_share_by_loss_is_dropped():
    result = reweight(IDS, LOSSES, 2.0, drop_top_share=0.05, seed=1)
    assert result.dropped.sum() == 100
    assert LOSSES[result.dropped].min() >= LOSSES[~result.dropped].max()
    assert (result.repetitions[result.dropped] == 0).all() and (result.repetitions[~result.dropped] >= 1).all()


def test_equal_losses_across_the_cut_are_counted_with_those_dropped_by_id():
    """The drop takes the highest losses, ties by id: when the cut falls among equal losses, which
    of them are dropped is the ids' order, not the probe's; the result says how many."""
    losses = np.where(np.arange(len(IDS)) < 300, 9.0, LOSSES.clip(max=8.0))  # 300 equal highest losses
    result = reweight(IDS, losses, 2.0, drop_top_share=0.1, seed=1)
    assert (result.tied_at_cut, result.tied_dropped) == (300, 200)
    assert (result.dropped[:200]).all() and not result.dropped[200:300].any()  # the lowest ids
    plain = reweight(IDS, LOSSES, 2.0, drop_top_share=0.1, seed=1)
    assert (plain.tied_at_cut, plain.tied_dropped) == (0, 0)


def test_a_cap_of_one_changes_nothing_but_the_drop():
    result = reweight(IDS, LOSSES, 1.0, 0.0, seed=1)
    assert (result.repetitions == 1).all()


@pytest.mark.parametrize(
    "cap, share, message",
    [(0.9, 0.0, "max_multiplier must be at least 1"), (1e9, 0.0, "max_multiplier must be at most 4"),
     (2.0, 0.5, "drop_top_share must be in"),
     (2.0, -0.1, "drop_top_share must be in"), (float("nan"), 0.0, "max_multiplier")],
)
def test_out_of_range_arguments_are_refused(cap, share, message):
    with pytest.raises(ReweightingRefused, match=message):
        reweight(IDS, LOSSES, cap, share, seed=1)


@pytest.mark.parametrize("scale", [5e-6 / np.median(LOSSES), 0.0])
def test_a_median_loss_near_zero_is_refused(scale):
    """An over-confident probe (median 5e-6 nats per token, or 0): every multiplier would be the
    noise of its loss over a vanishing median, and a median of 0 would switch reweighting off."""
    with pytest.raises(ReweightingRefused, match=r"median loss is \S+ nats per token, under 0\.01"):
        reweight(IDS, LOSSES * scale, 2.0, 0.0, seed=1)


def test_nan_and_infinite_losses_are_refused_naming_the_ids():
    losses = LOSSES.copy()
    losses[[3, 17]] = [np.nan, np.inf]
    with pytest.raises(ReweightingRefused,
                       match=r"2 rows with a NaN or infinite loss \(ids <urn:uuid:00000003>, <urn:uuid:00000017>\)"):
        reweight(IDS, losses, 2.0, 0.0, seed=1)


def test_documents_without_a_loss_are_refused_naming_the_dump_and_how_many():
    with pytest.raises(ReweightingRefused,
                       match="Dump CC-MAIN-2013-20: the probe has no loss for 2 rows of the source's 2,000"):
        aligned_losses("CC-MAIN-2013-20", IDS, IDS[2:], LOSSES[2:])
    assert (aligned_losses("CC-MAIN-2013-20", IDS[::-1], IDS, LOSSES) == LOSSES[::-1]).all()


def test_repetition_hashes_are_xxh64_of_the_seed_a_colon_and_the_id_bit_for_bit():
    ids = [*IDS[:50], "", "<urn:uuid:é漢字🙂>", "x" * 31, "y" * 32, "z" * 100]
    for seed in (0, 1234, 2**63 + 1):
        expected = [xxhash.xxh64_intdigest(f"{seed}:{i}".encode()) for i in ids]
        assert repetition_hashes(pa.array(ids), seed).tolist() == expected
        chunked = pa.chunked_array([pa.array(ids[:7]), pa.array(ids[7:]).slice(0)])
        assert repetition_hashes(chunked, seed).tolist() == expected
        assert repetition_hashes(pa.array(ids, pa.large_string()), seed).tolist() == expected
        assert repetition_hashes(pa.array(["pad", *ids]).slice(1), seed).tolist() == expected


@pytest.mark.parametrize("share", [0.0, 0.01, 0.05, 0.3])
def test_repetitions_and_the_highest_losses_are_the_rule_as_written_with_python_strings(share):
    rng = np.random.default_rng(11)
    ids = [f"<urn:uuid:{rng.integers(1 << 62):016x}>" for _ in range(3_000)]
    losses = np.round(rng.gamma(9.0, 0.5, len(ids)), 1)  # many ties, at the edge of the drop too
    repetitions, by_loss = rule_as_written(ids, losses, 2.5, share, seed=1234)
    result = reweight(ids, losses, 2.5, share, seed=1234)
    assert result.repetitions.tolist() == repetitions.tolist()
    assert result.highest.tolist() == by_loss[:10].tolist()
    assert list(result.highest_ids) == [ids[i] for i in by_loss[:10]]
