"""The blend's draw loop: `build_blending_indices` of Megatron-Core 0.16's `helpers.cpp`.

For each blend sample s, the dataset whose share is furthest behind its weight is drawn:
argmax_i (w_i · max(s, 1) − drawn_i), ties to the lowest i; dataset_index says which dataset,
dataset_sample_index which of its samples (its running count).

The loop is sequential by nature (every draw changes the next step's errors) and costs
samples × datasets steps: 10^11 for a 1T-token, 440-prefix blend. Megatron runs it in C++; here
numba compiles the same loop (a Python loop would take hours, see docs/benchmarks.md). Ours differs in
form only: Megatron's `verbose` printing is left out, and the caller passes the output arrays
(memmaps of the `.npy` files) instead of receiving them.
"""

import numpy as np

from fw_assets.lib.compiled import compiled_lazily


@compiled_lazily
def build_blending_indices(weights, dataset_index, dataset_sample_index):  # pragma: no cover - compiled
    drawn = np.zeros(len(weights), dtype=np.int64)
    for sample in range(len(dataset_index)):
        # The C++ computes the error in double as `weights[i] * max(s, 1.0) - current_samples[i]`:
        # one multiply, one subtract, each rounded (compiled without fastmath, so no fused
        # multiply-add), or a near-tie would go to another dataset than Megatron's.
        scale = max(float(sample), 1.0)
        best = 0
        best_error = weights[0] * scale - float(drawn[0])
        for dataset in range(1, len(weights)):
            error = weights[dataset] * scale - float(drawn[dataset])
            if error > best_error:  # strictly greater: ties go to the lowest dataset, as in the C++
                best_error = error
                best = dataset
        dataset_index[sample] = best
        dataset_sample_index[sample] = drawn[best]
        drawn[best] += 1
