"""Which documents, and which of their tokens, make up sample N of a stage's blend.

Reads the stage's cache files (memory-mapped, nothing built) the way Megatron's `BlendedDataset`
and `GPTDataset` do, and the `.docs.parquet` sidecar for the source ids.
"""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fw_assets.lib.doc_index import read_document_index
from fw_assets.lib.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.cache import SplitCache, stage_caches
from fw_assets.mixtures.gpt_indexes import EXTRA_TOKEN
from fw_assets.mixtures.plan import StagePlan


def explain_sample(stage: StagePlan, cache_dir: Path, split: str, sample: int) -> dict:
    """`{"dataset", "dataset_sample", "documents": [{"id", "dump", "bucket", "document_index",
    "offset", "length"}]}` for blend sample `sample` of `split`; the lengths add up to
    seq_length + 1 (the tokens and the last label)."""
    cache = _split_cache(stage, split)
    stem = Path(cache_dir) / cache.blend_stem
    dataset_index = _load(stem, "dataset_index.npy")
    if not 0 <= sample < len(dataset_index):
        raise IndexError(f"the {split} blend of stage {stage.name} has {len(dataset_index)} samples, not {sample}")
    member = int(dataset_index[sample])
    dataset_sample = int(_load(stem, "dataset_sample_index.npy")[sample])
    token_file = stage.members[member].file
    parts = _sample_parts(Path(cache_dir) / cache.member_stem(member), token_file.path,
                          dataset_sample, stage.seq_length)
    ids = _source_ids(token_file.path, [document for document, _, _ in parts])
    documents = [
        {"id": ids[document], "dump": token_file.dump, "bucket": token_file.bucket,
         "document_index": document, "offset": offset, "length": length}
        for document, offset, length in parts
    ]
    return {"dataset": token_file.prefix, "dataset_sample": dataset_sample, "documents": documents}


def _split_cache(stage: StagePlan, split: str) -> SplitCache:
    for cache in stage_caches(stage):
        if cache.split == split:
            return cache
    raise KeyError(f"stage {stage.name} has no {split} split (split {stage.cache.split!r})")


def _load(stem: Path, kind: str) -> np.ndarray:
    return np.load(f"{stem}-{kind}", mmap_mode="r", allow_pickle=False)


def _sample_parts(stem: Path, token_path: str, dataset_sample: int, seq_length: int) -> list[tuple[int, int, int]]:
    """(document, offset, length) of each piece of GPTDataset sample `dataset_sample`."""
    index = int(_load(stem, "shuffle_index.npy")[dataset_sample])
    sample_index = _load(stem, "sample_index.npy")
    document_index = _load(stem, "document_index.npy")
    (first, first_offset), (last, last_offset) = sample_index[index], sample_index[index + 1]
    lengths = IndexedDatasetReader(Path(token_path)).sequence_lengths
    parts = []
    for position in range(int(first), int(last) + 1):
        document = int(document_index[position])
        offset = int(first_offset) if position == first else 0
        end = int(last_offset) + EXTRA_TOKEN if position == last else int(lengths[document])
        parts.append((document, offset, end - offset))
    return parts


def _source_ids(token_path: str, documents: list[int]) -> dict[int, str]:
    table = read_document_index(Path(token_path))
    rows = table.filter(pc.is_in(table["document_index"], value_set=pa.array(documents, pa.int64())))
    return dict(zip(rows["document_index"].to_pylist(), rows["id"].to_pylist()))
