"""Runs of items within a budget: every item once, in order; a run over the budget is one item."""

import numpy as np

from fw_assets.lib.windows import windows


def test_runs_cover_every_item_in_order_within_the_budget():
    sizes = np.random.default_rng(4).integers(0, 50, 1000)
    sizes[[10, 500]] = [400, 1000]  # larger than the budget: alone
    runs = list(windows(sizes, 100))
    assert [i for run in runs for i in range(run.start, run.stop)] == list(range(len(sizes)))
    for run in runs:
        assert sizes[run].sum() <= 100 or run.stop - run.start == 1
        if run.stop < len(sizes):
            assert sizes[run.start : run.stop + 1].sum() > 100, "a run takes as many items as fit"
    assert list(windows(np.zeros(0, int), 100)) == []
