"""The model probe's batches: token sequences laid out for one forward pass each, with the
positions whose next token is scored. Plain numpy, apart from torch.

Sequences are taken longest first, so that those batched together have similar lengths, in one of
two layouts:

- PADDED: a sequence a row, rows as wide as the batch's longest, padding after each sequence. No
  attention mask is needed: causal attention never looks at a later position, so a sequence's
  tokens never see its padding, and attention runs its plain causal kernel.
- PACKED: several sequences a row, each with position ids from 0 (a model whose attention keeps
  such sequences apart: causal_lm.py checks), rows as wide as the longest sequence and filled
  best-fit, so that almost no position is padding.

A sequence of fewer than two tokens has nothing to score and is in no batch.
"""

import bisect
from dataclasses import dataclass

import numpy as np

PADDED, PACKED = "padded", "packed"
LAYOUTS = (PADDED, PACKED)
PAD_ID = 0  # any id the embedding has: no scored position attends to a padding position


@dataclass(frozen=True)
class Batch:
    """One forward pass: `input_ids` (rows x width), `position_ids` (PACKED only), and per scored
    position its flat index into the rows (`predicting`), the token it predicts (`targets`) and
    the sequence it belongs to (`owners`, an index into the sequences batched)."""

    input_ids: np.ndarray
    position_ids: np.ndarray | None
    predicting: np.ndarray
    targets: np.ndarray
    owners: np.ndarray

    @property
    def positions(self) -> int:
        """Positions the forward pass computes, padding included."""
        return self.input_ids.size


def batches(layout: str, sequences: list[np.ndarray], batch_tokens: int) -> list[Batch]:
    """`sequences` (token ids, each starting with its prefix) in batches of at most `batch_tokens`
    positions (a sequence longer than that alone)."""
    order = sorted((i for i, s in enumerate(sequences) if len(s) > 1), key=lambda i: -len(sequences[i]))
    rows = [[i] for i in order] if layout == PADDED else _packed_rows(order, sequences)
    groups, current, width = [], [], 0
    for row in rows:
        row_width = sum(len(sequences[i]) for i in row)
        if current and (len(current) + 1) * max(width, row_width) > batch_tokens:
            groups.append(current)
            current, width = [], 0
        current.append(row)
        width = max(width, row_width)
    groups += [current] if current else []
    return [_batch(group, sequences, layout == PACKED) for group in groups]


def _packed_rows(order: list[int], sequences: list[np.ndarray]) -> list[list[int]]:
    """Rows as wide as the longest sequence, each sequence (longest first) put in the row with the
    least room that holds it (best-fit decreasing)."""
    width = len(sequences[order[0]]) if order else 0
    rows: list[list[int]] = []
    rooms: list[tuple[int, int]] = []  # (room left, row), ascending
    for i in order:
        length = len(sequences[i])
        at = bisect.bisect_left(rooms, (length, -1))
        if at == len(rooms):
            rows.append([i])
            room, row = width - length, len(rows) - 1
        else:
            room, row = rooms.pop(at)
            rows[row].append(i)
            room -= length
        bisect.insort(rooms, (room, row))
    return rows


def _batch(rows: list[list[int]], sequences: list[np.ndarray], packed: bool) -> Batch:
    width = max(sum(len(sequences[i]) for i in row) for row in rows)
    input_ids = np.full((len(rows), width), PAD_ID, np.int64)
    position_ids = np.zeros((len(rows), width), np.int64) if packed else None
    predicting, targets, owners = [], [], []
    for r, row in enumerate(rows):
        offset = 0
        for i in row:
            sequence = sequences[i]
            length = len(sequence)
            input_ids[r, offset : offset + length] = sequence
            if packed:
                position_ids[r, offset : offset + length] = np.arange(length)
            predicting.append(r * width + offset + np.arange(length - 1))
            targets.append(sequence[1:])
            owners.append(np.full(length - 1, i, np.int64))
            offset += length
        if packed:  # the padding is a sequence of its own: its positions restart too
            position_ids[r, offset:] = np.arange(width - offset)
    return Batch(input_ids, position_ids, np.concatenate(predicting), np.concatenate(targets).astype(np.int64),
                 np.concatenate(owners))
