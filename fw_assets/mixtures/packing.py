"""Packed export: a stage's training samples as parquet rows, for trainers outside Megatron.

Row i of `packed/<stage>/part-*.parquet` (files sort in sample order) is sample i of the stage's
train blend (the stage's tokens // seq_length samples), read from the cache files the way Megatron's `BlendedDataset` and `GPTDataset` read
them: `input_ids` and `labels` (int32, exactly seq_length each, labels shifted by one), documents
concatenated with their end-of-document tokens and cut into fixed blocks (no padding), and
`documents`: the positions in `input_ids` where a document (or its remainder) starts, so a
trainer may mask attention across documents if it wants.
"""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.lib.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.cache import stage_caches
from fw_assets.mixtures.gpt_indexes import EXTRA_TOKEN
from fw_assets.mixtures.plan import StagePlan

SCHEMA = pa.schema([
    ("input_ids", pa.list_(pa.int32())),
    ("labels", pa.list_(pa.int32())),
    ("documents", pa.list_(pa.int32())),
])
ROWS_PER_FILE = 1 << 15


class _Member:
    """One GPTDataset of the blend: its cache arrays (memory-mapped) and its tokens."""

    def __init__(self, stem: Path, token_path: str) -> None:
        self.shuffle_index, self.sample_index, self.document_index = (
            np.load(f"{stem}-{kind}.npy", mmap_mode="r") for kind in ("shuffle_index", "sample_index", "document_index"))
        self.reader = IndexedDatasetReader(Path(token_path))

    def sample(self, j: int) -> tuple[np.ndarray, list[int]]:
        """GPTDataset sample j: its seq_length + 1 tokens and where each document piece starts."""
        index = int(self.shuffle_index[j])
        (first, first_offset), (last, last_offset) = self.sample_index[index], self.sample_index[index + 1]
        pieces = []
        for position in range(int(first), int(last) + 1):
            tokens = self.reader[int(self.document_index[position])]
            end = int(last_offset) + EXTRA_TOKEN if position == last else len(tokens)
            pieces.append(tokens[int(first_offset) if position == first else 0:end])
        starts = np.cumsum([0] + [len(p) for p in pieces[:-1]]).tolist()
        return np.concatenate(pieces), starts


def write_packed(stage: StagePlan, cache_dir: Path, out_dir: Path, rows_per_file: int = ROWS_PER_FILE) -> list[Path]:
    """Write the train samples training takes from `stage` (the first `--train-samples` of its
    blend, which Megatron builds a little longer) into `out_dir/part-NNNNNN.parquet`, from its
    cache files in `cache_dir`; returns the files in sample order."""
    cache = next(c for c in stage_caches(stage) if c.split == "train")
    blend = Path(cache_dir) / cache.blend_stem
    dataset_index = np.load(f"{blend}-dataset_index.npy", mmap_mode="r")
    dataset_sample_index = np.load(f"{blend}-dataset_sample_index.npy", mmap_mode="r")
    members = [_Member(Path(cache_dir) / cache.member_stem(i), m.file.path) for i, m in enumerate(stage.members)]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    rows = stage.num_samples[0]
    for part, start in enumerate(range(0, rows, rows_per_file)):
        stop = min(start + rows_per_file, rows)
        samples, starts = zip(*(members[int(dataset_index[i])].sample(int(dataset_sample_index[i]))
                                for i in range(start, stop)))
        path = out_dir / f"part-{part:06d}.parquet"
        pq.write_table(_rows(np.stack(samples).astype(np.int32), starts, stage.seq_length), path, compression="zstd")
        written.append(path)
    return written


def _rows(samples: np.ndarray, starts: tuple[list[int], ...], seq_length: int) -> pa.Table:
    """input_ids = tokens[:-1], labels = tokens[1:], as Megatron's GPTDataset gives them."""
    offsets = pa.array(np.arange(len(samples) + 1, dtype=np.int32) * seq_length)
    inputs = pa.ListArray.from_arrays(offsets, pa.array(samples[:, :-1].ravel()))
    labels = pa.ListArray.from_arrays(offsets, pa.array(samples[:, 1:].ravel()))
    documents = pa.array([[s for s in row if s < seq_length] for row in starts], pa.list_(pa.int32()))
    return pa.table([inputs, labels, documents], schema=SCHEMA)
