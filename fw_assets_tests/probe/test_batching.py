"""The model probe's batches: every scored token exactly once, predicted from the positions of its
own sequence; within the batch's size; packed rows with positions restarting per sequence and
(almost) no padding."""

import numpy as np
import pytest

from fw_assets.probe.batching import PACKED, PAD_ID, PADDED, batches


def sequences_of(lengths: list[int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 1000, n).astype(np.int64) for n in lengths]


def lognormal_lengths(n: int, seed: int = 0) -> list[int]:
    """FineWeb-Edu-like: lognormal lengths, cut at 1,025 (1,024 tokens and the prefix)."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(800), 1.0, n).astype(int), 1, 1025).tolist()


def scored(made: list, sequences: list[np.ndarray]) -> dict[int, list[tuple[int, int]]]:
    """Per sequence, (the token at each scored position, the token it predicts), read back."""
    found: dict[int, list[tuple[int, int]]] = {}
    for batch in made:
        flat = batch.input_ids.reshape(-1)
        for position, target, owner in zip(batch.predicting, batch.targets, batch.owners):
            found.setdefault(int(owner), []).append((int(flat[position]), int(target)))
    return found


@pytest.mark.parametrize("layout", [PADDED, PACKED])
def test_every_token_after_the_first_is_scored_once_from_the_token_before_it(layout):
    sequences = sequences_of([5, 1, 0, 17, 2, 9, 9, 30, 4])
    made = batches(layout, sequences, batch_tokens=32)
    found = scored(made, sequences)
    assert sorted(found) == [i for i, s in enumerate(sequences) if len(s) > 1], "no sequence of 0 or 1 token"
    for i, pairs in found.items():
        assert pairs == list(zip(sequences[i][:-1].tolist(), sequences[i][1:].tolist()))


@pytest.mark.parametrize("layout", [PADDED, PACKED])
def test_a_batch_holds_at_most_batch_tokens_unless_one_row_is_longer(layout):
    sequences = sequences_of(lognormal_lengths(300))
    for batch in batches(layout, sequences, batch_tokens=4096):
        assert batch.positions <= 4096 or len(batch.input_ids) == 1


def test_padded_rows_hold_one_sequence_longest_first_padding_after_it():
    sequences = sequences_of([3, 8, 5, 2])
    (first, second) = batches(PADDED, sequences, batch_tokens=16)
    assert first.position_ids is None and first.input_ids.shape == (2, 8)
    assert (first.input_ids[0] == sequences[1]).all() and (first.input_ids[1, :5] == sequences[2]).all()
    assert (first.input_ids[1, 5:] == PAD_ID).all()
    assert second.input_ids.shape == (2, 3), "the next rows are as wide as their own longest"


def test_packed_rows_fill_best_fit_with_positions_restarting_per_sequence():
    sequences = sequences_of([10, 6, 4, 3, 3])
    (batch,) = batches(PACKED, sequences, batch_tokens=30)
    assert batch.input_ids.shape == (3, 10)
    assert batch.input_ids[1].tolist() == [*sequences[1], *sequences[2]]
    assert batch.position_ids[1].tolist() == [*range(6), *range(4)]
    assert batch.input_ids[2, :6].tolist() == [*sequences[3], *sequences[4]]
    assert batch.position_ids[2].tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 3], "the padding restarts too"


def test_packing_leaves_far_less_padding_than_one_sequence_a_row():
    sequences = sequences_of(lognormal_lengths(2000))
    tokens = sum(len(s) for s in sequences if len(s) > 1)
    padding = {layout: sum(b.positions for b in batches(layout, sequences, 65_536)) / tokens - 1
               for layout in (PADDED, PACKED)}
    assert padding[PACKED] < 0.01 and padding[PACKED] < padding[PADDED] / 3, padding
