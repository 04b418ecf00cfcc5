"""A GPTDataset's three indexes, as Megatron-Core 0.16 builds them, in numpy.

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
"""

from dataclasses import dataclass

import numpy as np

# Megatron builds samples of seq_length + 1 tokens (inputs and labels shifted by one)
EXTRA_TOKEN = 1
# the last epoch is shuffled separately when it supplies fewer samples than this share of one
SEPARATE_FINAL_EPOCH_BELOW = 0.80
INT32_MAX = np.iinfo(np.int32).max


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
    split_documents = np.arange(begin, end, dtype=np.int32)
    tokens = int(sequence_lengths[begin:end].sum(dtype=np.int64))
    epochs = plan_epochs(tokens, num_samples, seq_length)
    random_state = np.random.RandomState(seed)
    document_index = build_document_index(split_documents, epochs, random_state)
    sample_index = build_sample_index(sequence_lengths, document_index, seq_length, epochs)
    shuffle_index = build_shuffle_index(len(sample_index) - 1, epochs, random_state)
    return GPTIndexes(document_index, sample_index, shuffle_index, epochs)
