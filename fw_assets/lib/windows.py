"""Consecutive runs of items whose sizes add up to a budget: how the steps read and write a few
MB at a time (documents by tokens, texts by bytes)."""

from collections.abc import Iterator

import numpy as np


def windows(sizes: np.ndarray, budget: int) -> Iterator[slice]:
    """Consecutive runs of items of at most `budget` in size together (a larger one alone)."""
    ends = np.cumsum(sizes)
    start = 0
    while start < len(sizes):
        before = int(ends[start - 1]) if start else 0
        stop = max(int(np.searchsorted(ends, before + budget, side="right")), start + 1)
        yield slice(start, stop)
        start = stop
