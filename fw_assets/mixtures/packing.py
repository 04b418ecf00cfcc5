"""Packed export: a stage's training samples as parquet rows, for trainers outside Megatron.

Row i of `packed/<stage>/part-*.parquet` (files sort in sample order) is sample i of the stage's
train blend (the stage's tokens // seq_length samples), read from the cache files the way
Megatron's `BlendedDataset` and `GPTDataset` read them: `input_ids` and `labels` (int32, exactly
seq_length each, labels shifted by one), documents concatenated with their end-of-document tokens
and cut into fixed blocks (no padding), and `documents`: the positions in `input_ids` where a
document (or its remainder) starts, so a trainer may mask attention across documents if it wants.
"""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.mixtures.published import BlendSamples
from fw_assets.mixtures.stage_plan import StagePlan

SCHEMA = pa.schema([
    ("input_ids", pa.list_(pa.int32())),
    ("labels", pa.list_(pa.int32())),
    ("documents", pa.list_(pa.int32())),
])
# A fixed number of rows per file, not a size in bytes: file k then holds samples k·N … (k+1)·N − 1
# whatever the tokens compress to, so a reader finds sample i by arithmetic, and the same plan
# writes the same files on every machine.
ROWS_PER_FILE = 1 << 15


def write_packed(stage: StagePlan, cache_dir: Path, out_dir: Path, rows_per_file: int = ROWS_PER_FILE) -> list[Path]:
    """Write the train samples training takes from `stage` (the first `--train-samples` of its
    blend, which Megatron builds a little longer) into `out_dir/part-NNNNNN.parquet`, from its
    cache files in `cache_dir`; returns the files in sample order."""
    samples = BlendSamples(stage, cache_dir, "train")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    rows = stage.num_samples[0]
    for part, start in enumerate(range(0, rows, rows_per_file)):
        stop = min(start + rows_per_file, rows)
        tokens, starts = zip(*(_sample_tokens(samples, i) for i in range(start, stop)))
        path = out_dir / f"part-{part:06d}.parquet"
        table = _rows(np.stack(tokens).astype(np.int32), starts, stage.seq_length)
        try:
            pq.write_table(table, path, compression="zstd")
        except OSError as error:  # Arrow's error has the errno, not the file: name it
            raise OSError(error.errno, error.strerror or str(error), str(path)) from error
        written.append(path)
    return written


def _sample_tokens(samples: BlendSamples, sample: int) -> tuple[np.ndarray, list[int]]:
    """Blend sample `sample`'s seq_length + 1 tokens and where each document piece starts."""
    member, _, parts = samples.pieces(sample)
    reader = samples.token_reader(member)
    pieces = [reader[document][offset:offset + length] for document, offset, length in parts]
    starts = np.cumsum([0] + [len(p) for p in pieces[:-1]]).tolist()
    return np.concatenate(pieces), starts


def _rows(samples: np.ndarray, starts: tuple[list[int], ...], seq_length: int) -> pa.Table:
    """input_ids = tokens[:-1], labels = tokens[1:], as Megatron's GPTDataset gives them."""
    offsets = pa.array(np.arange(len(samples) + 1, dtype=np.int32) * seq_length)
    inputs = pa.ListArray.from_arrays(offsets, pa.array(samples[:, :-1].ravel()))
    labels = pa.ListArray.from_arrays(offsets, pa.array(samples[:, 1:].ravel()))
    documents = pa.array([[s for s in row if s < seq_length] for row in starts], pa.list_(pa.int32()))
    return pa.table([inputs, labels, documents], schema=SCHEMA)
