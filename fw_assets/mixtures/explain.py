"""Which documents, and which of their tokens, make up sample N of a stage's blend.

Walks the stage's cache files (`published.BlendSamples`) and reads the `.docs.parquet` sidecar for
the source ids.
"""

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from fw_assets.formats.doc_index import read_document_index
from fw_assets.mixtures.published import BlendSamples
from fw_assets.mixtures.stage_plan import StagePlan


def explain_sample(stage: StagePlan, cache_dir: Path, split: str, sample: int) -> dict:
    """`{"dataset", "dataset_sample", "documents": [{"id", "dump", "bucket", "document_index",
    "offset", "length"}]}` for blend sample `sample` of `split`; the lengths add up to
    seq_length + 1 (the tokens and the last label)."""
    samples = BlendSamples(stage, cache_dir, split)
    if not 0 <= sample < len(samples):
        raise IndexError(f"the {split} blend of stage {stage.name} has {len(samples)} samples, not {sample}")
    member, dataset_sample, parts = samples.pieces(sample)
    token_file = stage.members[member].file
    ids = _source_ids(token_file.path, [document for document, _, _ in parts])
    documents = [
        {"id": ids[document], "dump": token_file.dump, "bucket": token_file.bucket,
         "document_index": document, "offset": offset, "length": length}
        for document, offset, length in parts
    ]
    return {"dataset": token_file.prefix, "dataset_sample": dataset_sample, "documents": documents}


def _source_ids(token_path: str, documents: list[int]) -> dict[int, str]:
    table = read_document_index(Path(token_path))
    rows = table.filter(pc.is_in(table["document_index"], value_set=pa.array(documents, pa.int64())))
    return dict(zip(rows["document_index"].to_pylist(), rows["id"].to_pylist()))
