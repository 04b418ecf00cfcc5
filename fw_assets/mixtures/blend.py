"""The blend's two indexes, as Megatron-Core 0.16's `build_blending_indices` makes them.

For each blend sample s, the dataset whose share is furthest behind its weight is drawn:
argmax_i (w_i · max(s, 1) − drawn_i), ties to the lowest i; dataset_index (int16) says which
dataset, dataset_sample_index (int64) which of its samples (its running count).

The loop is sequential by nature (every draw changes the next step's errors) and costs
samples × datasets steps: 10^11 for a 1T-token, 440-prefix blend. Megatron runs it in C++; here
numba compiles the same loop (a Python loop would take hours, see BENCHMARKS.md). Floating point is
exactly the C++'s: one multiply, one subtract, no fused multiply-add (numba's default, no fastmath).
"""

from functools import cache

import numpy as np

# dataset_index is int16, and Megatron asserts fewer than 32,767 datasets
MAX_DATASETS = 32766


def build_blend_indexes(weights: list[float], dataset_index: np.ndarray, dataset_sample_index: np.ndarray) -> None:
    """Fill dataset_index (int16) and dataset_sample_index (int64), one entry per blend sample
    (arrays or `.npy` memmaps of the blend's size)."""
    if not 0 < len(weights) <= MAX_DATASETS:
        raise ValueError(f"a blend has 1 to {MAX_DATASETS} datasets, not {len(weights)}")
    if dataset_index.dtype != np.int16 or dataset_sample_index.dtype != np.int64:
        raise TypeError("dataset_index is int16 and dataset_sample_index int64, as Megatron writes them")
    greedy_draws = _compiled_greedy_draws()
    greedy_draws(np.asarray(weights, dtype=np.float64), dataset_index, dataset_sample_index)


@cache
def _compiled_greedy_draws():
    """The loop below compiled by numba, imported here so that loading the code location does not
    load LLVM (fw_assets_tests/test_structure.py)."""
    import numba

    return numba.njit(cache=True, nogil=True)(_greedy_draws)


def _greedy_draws(weights, dataset_index, dataset_sample_index):  # pragma: no cover - compiled
    drawn = np.zeros(len(weights), dtype=np.int64)
    for sample in range(len(dataset_index)):
        scale = max(float(sample), 1.0)
        best = 0
        best_error = weights[0] * scale - float(drawn[0])
        for dataset in range(1, len(weights)):
            error = weights[dataset] * scale - float(drawn[dataset])
            if error > best_error:
                best_error = error
                best = dataset
        dataset_index[sample] = best
        dataset_sample_index[sample] = drawn[best]
        drawn[best] += 1
