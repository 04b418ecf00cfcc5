"""What Megatron-Core 0.16's `datasets/utils.py` gives the builder: the split names (its `Split`
enum, here the names in order) and `normalize`."""

import numpy as np

SPLITS = ("train", "valid", "test")


def normalize(weights: list[float]) -> list[float]:
    """Megatron's `normalize`: `w / numpy.sum(w)` in float64.

    numpy's sum, not Python's: it adds pairwise from 8 values on, and the weights it gives enter the
    md5-hashed descriptions, so a last bit rounded otherwise would name another cache.
    """
    w = np.array(weights, dtype=np.float64)
    return (w / np.sum(w)).tolist()
