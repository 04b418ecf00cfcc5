"""One GPTDataset, as Megatron-Core 0.16's `gpt_dataset.py` makes and reads it: its description
(`unique_identifiers`), its three indexes (`_build_document_sample_shuffle_indices`, with
`_get_num_epochs`, `_build_document_index`, `_build_shuffle_index` and the C++
`helpers.build_sample_idx`) and the pieces of documents one sample covers
(`_query_document_sample_shuffle_indices`).

For one dataset split (documents [begin, end) of a prefix) and a number of samples of
`seq_length + 1` tokens:
- document_index: the split's documents repeated once per epoch and shuffled (int32); when the
  last epoch is needed for less than 80 % of an epoch, it is shuffled on its own, so no document
  is drawn twice more than another;
- sample_index: [samples + 1, 2] rows (position in document_index, token offset): where each
  sample starts; sample k covers tokens k·L … k·L + L of the concatenated documents, so
  consecutive samples share one token;
- shuffle_index: the samples in random order (uint32, int64 from 2^32 − 2), the separate last
  epoch again shuffled on its own.
Both shuffles draw from one `numpy.random.RandomState(seed)`, document_index first.

Ours differs in form only: the sample index is found by one binary search instead of the C++ walk
(`build_sample_index`), and the reader gives (document, offset, length) pieces rather than tokens.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fw_assets.mixtures.megatron.blended_megatron_dataset_config import CacheSettings

# Megatron builds samples of seq_length + 1 tokens (inputs and labels shifted by one)
EXTRA_TOKEN = 1
# the last epoch is shuffled separately when it supplies fewer samples than this share of one
SEPARATE_FINAL_EPOCH_BELOW = 0.80
INT32_MAX = np.iinfo(np.int32).max
GPT_FILES = ("description.txt", "document_index.npy", "sample_index.npy", "shuffle_index.npy")


def gpt_description(prefix: str, num_samples: int, split: str, settings: CacheSettings) -> dict:
    """The GPTDataset's `unique_identifiers`, in Megatron's key order."""
    return {
        "class": "GPTDataset",
        "dataset_path": prefix,
        "num_samples": num_samples,
        "index_split": split,
        **settings.identifiers(),
    }


@dataclass(frozen=True)
class EpochPlan:
    """How many passes over the split's documents `num_samples` samples need."""

    tokens_per_epoch: int
    num_epochs: int
    samples_before_final_epoch: int
    separate_final_epoch: bool


def plan_epochs(tokens_per_epoch: int, num_samples: int, seq_length: int) -> EpochPlan:
    """The fewest epochs whose tokens cover num_samples · seq_length + 1, and the final-epoch rule."""
    if tokens_per_epoch <= EXTRA_TOKEN:
        raise ValueError(f"a dataset split needs more than {EXTRA_TOKEN} token, it has {tokens_per_epoch}")
    tokens_needed = num_samples * seq_length + EXTRA_TOKEN
    num_epochs = max(1, -(-tokens_needed // tokens_per_epoch))
    before_final = ((num_epochs - 1) * tokens_per_epoch - EXTRA_TOKEN) // seq_length
    if num_epochs == 1:
        return EpochPlan(tokens_per_epoch, 1, before_final, False)
    per_epoch = (tokens_per_epoch - EXTRA_TOKEN) // seq_length
    from_final = num_samples - before_final
    separate = from_final < int(SEPARATE_FINAL_EPOCH_BELOW * per_epoch)
    return EpochPlan(tokens_per_epoch, num_epochs, before_final, separate)


def build_document_index(
    documents: np.ndarray, epochs: EpochPlan, random_state: np.random.RandomState
) -> np.ndarray:
    """The split's document numbers once per epoch, shuffled (the final epoch apart if separate)."""
    documents = documents.astype(np.int32, copy=False)
    if not epochs.separate_final_epoch:
        return _shuffled_epochs(documents, epochs.num_epochs, random_state)
    first = _shuffled_epochs(documents, epochs.num_epochs - 1, random_state)
    last = _shuffled_epochs(documents, 1, random_state)
    return np.concatenate((first, last))


def _shuffled_epochs(documents: np.ndarray, num_epochs: int, random_state) -> np.ndarray:
    repeated = np.tile(documents, num_epochs)
    # RandomState.shuffle draws the same swaps for any dtype of the same length
    random_state.shuffle(repeated)
    return repeated


def build_sample_index(
    sequence_lengths: np.ndarray, document_index: np.ndarray, seq_length: int, epochs: EpochPlan
) -> np.ndarray:
    """[samples + 1, 2]: for sample k, the document_index position and the offset of token k·L.

    Megatron's C++ helper walks the documents one by one; here every start is found at once by a
    binary search in the running token count. A start that falls on a document boundary belongs
    to the next (non-empty) document, as in the walk.
    """
    num_samples = (epochs.num_epochs * epochs.tokens_per_epoch - EXTRA_TOKEN) // seq_length
    lengths = sequence_lengths[document_index]
    ends = np.cumsum(lengths, dtype=np.int64)
    starts = np.arange(num_samples + 1, dtype=np.int64) * seq_length
    positions = np.searchsorted(ends, starts, side="right")
    offsets = starts - (ends[positions] - lengths[positions])
    # the dtype is part of the file's bytes: Megatron picks the int32 C++ template unless a
    # position or an offset could exceed it
    widest = max(len(document_index), int(sequence_lengths.max()))
    dtype = np.int32 if widest <= INT32_MAX else np.int64
    sample_index = np.empty((num_samples + 1, 2), dtype=dtype)
    sample_index[:, 0] = positions
    sample_index[:, 1] = offsets
    sample_index[0] = 0  # the walk starts at (0, 0) even on an empty first document
    return sample_index


def build_shuffle_index(
    num_samples: int, epochs: EpochPlan, random_state: np.random.RandomState
) -> np.ndarray:
    """0 … num_samples − 1 shuffled; with a separate final epoch, its samples shuffled apart."""
    # Megatron's threshold, kept to the unit (uint32 below 2^32 − 2): the dtype is in the file's bytes
    dtype = np.uint32 if num_samples < np.iinfo(np.uint32).max - 1 else np.int64
    first_part = epochs.samples_before_final_epoch if epochs.separate_final_epoch else num_samples
    first = np.arange(first_part, dtype=dtype)
    random_state.shuffle(first)
    if first_part == num_samples:
        return first
    last = np.arange(first_part, num_samples, dtype=dtype)
    random_state.shuffle(last)
    return np.concatenate((first, last))


@dataclass(frozen=True)
class GPTIndexes:
    document_index: np.ndarray
    sample_index: np.ndarray
    shuffle_index: np.ndarray
    epochs: EpochPlan


def build_gpt_indexes(
    sequence_lengths: np.ndarray,
    documents: tuple[int, int],
    num_samples: int,
    seq_length: int,
    seed: int,
) -> GPTIndexes:
    """The indexes of one dataset split: documents [begin, end) of a prefix whose `.idx` has
    `sequence_lengths`, drawing `num_samples` samples of `seq_length` (+1) tokens."""
    begin, end = documents
    documents_of_split = np.arange(begin, end, dtype=np.int32)
    tokens = int(sequence_lengths[begin:end].sum(dtype=np.int64))
    epochs = plan_epochs(tokens, num_samples, seq_length)
    random_state = np.random.RandomState(seed)
    document_index = build_document_index(documents_of_split, epochs, random_state)
    sample_index = build_sample_index(sequence_lengths, document_index, seq_length, epochs)
    shuffle_index = build_shuffle_index(len(sample_index) - 1, epochs, random_state)
    return GPTIndexes(document_index, sample_index, shuffle_index, epochs)


class CachedGPTDataset:
    """A built GPTDataset's three indexes, memory-mapped from `<stem>-*.npy`, and its documents'
    lengths (from the prefix's `.idx`)."""

    def __init__(self, stem: Path, sequence_lengths: np.ndarray) -> None:
        self.shuffle_index, self.sample_index, self.document_index = (
            np.load(f"{stem}-{kind}.npy", mmap_mode="r", allow_pickle=False)
            for kind in ("shuffle_index", "sample_index", "document_index"))
        self.sequence_lengths = sequence_lengths

    def pieces(self, sample: int) -> list[tuple[int, int, int]]:
        """(document, offset, length) of each piece of sample `sample`: seq_length + 1 tokens in all."""
        index = int(self.shuffle_index[sample])
        (first, first_offset), (last, last_offset) = self.sample_index[index], self.sample_index[index + 1]
        parts = []
        for position in range(int(first), int(last) + 1):
            document = int(self.document_index[position])
            offset = int(first_offset) if position == first else 0
            end = int(last_offset) + EXTRA_TOKEN if position == last else int(self.sequence_lengths[document])
            parts.append((document, offset, end - offset))
        return parts
