"""gpt_dataset.py against Megatron-Core itself: each index equals the one Megatron's own function
builds from the same inputs (document index, the C++ sample index, shuffle index), and every
curriculum view needs exactly one epoch of Megatron's GPTDataset."""

import numpy as np
import pytest

from fw_assets.mixtures.megatron.gpt_dataset import (
    build_document_index,
    build_sample_index,
    build_shuffle_index,
    plan_epochs,
)
from fw_assets_tests.support.megatron_oracle import megatron_build

pytestmark = pytest.mark.needs_extra("megatron")


SEQ_LENGTH = 32


def documents_and_lengths() -> tuple[np.ndarray, np.ndarray]:
    """Documents 100..399 of a 500-document prefix, some of them empty (a sample may start on a
    document boundary or an empty document)."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 90, 500).astype(np.int32)
    lengths[rng.choice(500, 40, replace=False)] = 0
    return np.arange(100, 400, dtype=np.int32), lengths


# within one epoch; a short last epoch (shuffled apart); a long last epoch (shuffled with the rest)
@pytest.mark.parametrize("epochs_asked, separate", [(0.5, False), (1.3, True), (2.9, False)])
def test_the_three_indexes_are_megatrons(epochs_asked, separate):
    from megatron.core.datasets.gpt_dataset import _build_document_index, _build_shuffle_index
    from megatron.core.datasets.helpers import build_sample_idx

    documents, lengths = documents_and_lengths()
    tokens, seq_length = int(lengths[documents].sum()), SEQ_LENGTH
    epochs = plan_epochs(tokens, int(epochs_asked * tokens / seq_length), seq_length)
    assert epochs.num_epochs == int(epochs_asked) + 1 and epochs.separate_final_epoch == separate
    ours, theirs = np.random.RandomState(7), np.random.RandomState(7)
    document_index = build_document_index(documents, epochs, ours)
    expected = _build_document_index(documents, epochs.num_epochs, theirs, epochs.separate_final_epoch)
    assert document_index.dtype == expected.dtype and np.array_equal(document_index, expected)
    sample_index = build_sample_index(lengths, document_index, seq_length, epochs)
    expected = build_sample_idx(lengths, expected, seq_length, epochs.num_epochs, epochs.tokens_per_epoch)
    assert sample_index.dtype == expected.dtype and np.array_equal(sample_index, expected)
    total = len(sample_index) - 1
    first = epochs.samples_before_final_epoch if epochs.separate_final_epoch else total
    shuffle_index = build_shuffle_index(total, epochs, ours)
    expected = _build_shuffle_index(first, total, theirs)
    assert shuffle_index.dtype == expected.dtype and np.array_equal(shuffle_index, expected)


def test_each_view_needs_one_epoch_of_megatrons_gptdataset(curriculum_cache, process_group):
    mixture, ours, _ = curriculum_cache
    for stage in mixture.stages:
        train = megatron_build(stage, ours)[0]
        for member, dataset in zip(stage.members, train.datasets):
            assert dataset.dataset.path_prefix == member.file.path
            assert len(dataset.document_index) == len(dataset.indices), (stage.name, member.file.path)
