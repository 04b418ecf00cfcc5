"""Capped loss-based reweighting: the cap, the floor, the dropped top share, deterministic whole
repetitions keyed on id and seed, and the refusals."""

import numpy as np
import pytest

from fw_assets.mixtures.reweighting import ReweightingRefused, aligned_losses, reweight

IDS = [f"<urn:uuid:{i:08d}>" for i in range(2_000)]
LOSSES = np.random.default_rng(3).gamma(9.0, 0.5, len(IDS))


def test_multipliers_grow_with_loss_and_stay_between_one_and_the_cap():
    result = reweight(IDS, LOSSES, max_multiplier=2.0, drop_top_share=0.0, seed=1)
    assert result.multipliers.min() == 1.0 and result.multipliers.max() == 2.0
    order = np.argsort(LOSSES)
    assert (np.diff(result.multipliers[order]) >= 0).all(), "a higher loss never gets a lower multiplier"
    assert (LOSSES[result.multipliers > 1] > result.typical_loss).all()
    assert result.typical_loss == np.median(LOSSES)


def test_repetitions_are_whole_at_most_the_cap_and_average_the_multiplier():
    result = reweight(IDS, LOSSES, max_multiplier=2.5, drop_top_share=0.0, seed=1)
    assert set(np.unique(result.repetitions)) <= {1, 2, 3}
    assert (result.repetitions >= np.floor(result.multipliers)).all()
    assert (result.repetitions <= np.ceil(result.multipliers)).all()
    assert abs(result.repetitions.sum() - result.multipliers.sum()) < 0.05 * len(IDS)


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
    with pytest.raises(ReweightingRefused, match=r"2 rows with a NaN or infinite loss \(ids <urn:uuid:00000003>, <urn:uuid:00000017>\)"):
        reweight(IDS, losses, 2.0, 0.0, seed=1)


def test_documents_without_a_loss_are_refused_naming_the_dump_and_how_many():
    with pytest.raises(ReweightingRefused, match="Dump CC-MAIN-2013-20: the probe has no loss for 2 rows of the source's 2,000"):
        aligned_losses("CC-MAIN-2013-20", IDS, IDS[2:], LOSSES[2:])
    assert (aligned_losses("CC-MAIN-2013-20", IDS[::-1], IDS, LOSSES) == LOSSES[::-1]).all()
