"""blended_dataset.py against Megatron-Core's C++ `build_blending_indices`: the same dataset index
and dataset sample index, bit for bit, also where two datasets' errors nearly tie; and what a blend
cannot be."""

import numpy as np
import pytest

from fw_assets.mixtures.megatron.blended_dataset import MAX_DATASETS, build_blend_indexes
from fw_assets.mixtures.megatron.utils import normalize


def blend(weights: list[float], size: int) -> tuple[np.ndarray, np.ndarray]:
    dataset_index, dataset_sample_index = np.empty(size, np.int16), np.empty(size, np.int64)
    build_blend_indexes(weights, dataset_index, dataset_sample_index)
    return dataset_index, dataset_sample_index


@pytest.mark.parametrize("weights", [
    normalize([0.5, 0.3, 0.2]),
    normalize([1.0, 1.0, 1.0]),  # every step a tie: the lowest dataset wins
    normalize(list(np.random.default_rng(0).random(300))),
    normalize([1 / 3, 1 / 3 + 1e-15, 1 / 3 - 1e-15]),  # ties broken by the last bits of the error
])
@pytest.mark.needs_extra("megatron")
def test_the_blend_is_megatrons(weights):
    from megatron.core.datasets import helpers

    size = 20_000
    expected_index, expected_sample = np.empty(size, np.int16), np.empty(size, np.int64)
    helpers.build_blending_indices(expected_index, expected_sample, np.array(weights), len(weights), size, False)
    dataset_index, dataset_sample_index = blend(weights, size)
    assert np.array_equal(dataset_index, expected_index)
    assert np.array_equal(dataset_sample_index, expected_sample)


def test_a_blend_megatron_cannot_hold_is_refused():
    with pytest.raises(ValueError, match=f"1 to {MAX_DATASETS} datasets"):
        blend([1 / (MAX_DATASETS + 1)] * (MAX_DATASETS + 1), 10)
    with pytest.raises(TypeError, match="int16"):
        build_blend_indexes([1.0], np.empty(3, np.int32), np.empty(3, np.int64))
