"""The blend of one split, as Megatron-Core 0.16's `BlendedDataset` (`blended_dataset.py`) makes it:
its description (`unique_identifiers`), its two indexes (`_build_indices`, whose loop is
`helpers.build_blending_indices`) and how a blend sample is looked up (`__getitem__`).

dataset_index (int16) says which member dataset each blend sample comes from, dataset_sample_index
(int64) which of that member's samples. Ours differs in form only: the indexes are drawn straight
into the `.npy` files (`blended_megatron_dataset_builder`), and the blend is described by a dict.
"""

from pathlib import Path

import numpy as np

from fw_assets.mixtures.megatron.helpers import build_blending_indices

# dataset_index is int16, and Megatron asserts fewer than 32,767 datasets
MAX_DATASETS = 32766
BLEND_FILES = ("description.txt", "dataset_index.npy", "dataset_sample_index.npy")


def blend_description(datasets: list[dict], split: str, weights: list[float], size: int) -> dict:
    """The BlendedDataset's `unique_identifiers`: its members' descriptions and the weights as
    normalised a second time."""
    return {
        "class": "BlendedDataset",
        "datasets": datasets,
        "split": split,
        "weights": weights,
        "size": size,
    }


def build_blend_indexes(weights: list[float], dataset_index: np.ndarray, dataset_sample_index: np.ndarray) -> None:
    """Fill dataset_index (int16) and dataset_sample_index (int64), one entry per blend sample
    (arrays or `.npy` memmaps of the blend's size)."""
    if not 0 < len(weights) <= MAX_DATASETS:
        raise ValueError(f"a blend has 1 to {MAX_DATASETS} datasets, not {len(weights)}")
    if dataset_index.dtype != np.int16 or dataset_sample_index.dtype != np.int64:
        raise TypeError("dataset_index is int16 and dataset_sample_index int64, as Megatron writes them")
    build_blending_indices(np.asarray(weights, dtype=np.float64), dataset_index, dataset_sample_index)


class CachedBlend:
    """A built blend's two indexes, memory-mapped from `<stem>-*.npy` (nothing is read whole)."""

    def __init__(self, stem: Path) -> None:
        self.dataset_index = np.load(f"{stem}-dataset_index.npy", mmap_mode="r", allow_pickle=False)
        self.dataset_sample_index = np.load(f"{stem}-dataset_sample_index.npy", mmap_mode="r", allow_pickle=False)

    def __len__(self) -> int:
        return len(self.dataset_index)

    def __getitem__(self, sample: int) -> tuple[int, int]:
        """(member dataset, its sample) of blend sample `sample`, as `BlendedDataset.__getitem__`."""
        return int(self.dataset_index[sample]), int(self.dataset_sample_index[sample])
