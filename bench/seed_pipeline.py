"""The seed's datatrove pipeline (the bucketing design fw_assets grew from), re-implemented for the benchmark.

ParquetReader (id, text, score, file_path) -> StratifiedSampler -> MultiBucketWriter, run by
LocalPipelineExecutor, writing `en/<bucket>/<dump>/<rank>.parquet` (id, text, score; zstd).
The seed's sketch calls its steps once per document; datatrove steps are generators over the
document stream, so the sampler is a `BaseFilter` and the writer a step that opens one
`ParquetWriter` per (bucket, dump) as documents arrive and closes them when its task ends.
Needs the optional `bench` dependencies (`pip install -e '.[bench]'`).
"""

import hashlib
import re
from pathlib import Path

from datatrove.data import Document, DocumentsPipeline
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import ParquetWriter

SEED_COLUMNS = ["id", "text", "score", "file_path"]
# (low, high, rate), left-closed; below the first bucket is dropped
SAMPLING_RATES = ((2.8, 3.0, 0.30), (3.0, 3.5, 0.60), (3.5, 4.0, 0.80), (4.0, float("inf"), 1.0))


class ProjectedParquetReader(ParquetReader):
    """ParquetReader reading only the seed's four columns.

    The seed projects columns (`columns=[...]`); datatrove 0.10's reader has no such argument
    and reads every column when it keeps metadata, so this reads the projection the seed asks
    for (fewer bytes decoded: it only makes datatrove faster).
    """

    def read_file(self, filepath: str) -> DocumentsPipeline:
        import pyarrow.parquet as pq

        with self.data_folder.open(filepath, "rb") as f, pq.ParquetFile(f) as parquet:
            row = 0
            for batch in parquet.iter_batches(batch_size=self.batch_size, columns=SEED_COLUMNS):
                with self.track_time("batch"):
                    documents = []
                    for line in batch.to_pylist():
                        document = self.get_document_from_dict(line, filepath, row)
                        if document:
                            documents.append(document)
                            row += 1
                yield from documents


def score_bucket(score: float) -> tuple[float, float, float] | None:
    """The (low, high, rate) interval holding `score`, or None below 2.8."""
    for low, high, rate in SAMPLING_RATES:
        if low <= score < high:
            return low, high, rate
    return None


class StratifiedSampler(BaseFilter):
    """Keep a document iff md5(f"{seed}_{id}_{low}_{high}") % 10000 / 10000 < its bucket's rate."""

    name = "Stratified sampler (seed)"

    def __init__(self, random_seed: int = 42):
        super().__init__()
        self.random_seed = random_seed

    def filter(self, doc: Document) -> bool:
        bucket = score_bucket(doc.metadata.get("score", 0) or 0)
        if bucket is None:
            return False
        low, high, rate = bucket
        key = f"{self.random_seed}_{doc.id}_{low}_{high}"
        draw = int(hashlib.md5(key.encode()).hexdigest(), 16)
        return (draw % 10000) / 10000.0 < rate


def _id_text_score(writer: ParquetWriter, document: Document) -> dict:
    """Only the seed's three output columns (`file_path` is needed only to route the document)."""
    return {"id": document.id, "text": document.text, "score": document.metadata["score"]}


class MultiBucketWriter(PipelineStep):
    """Routes each document to `<base>/en/<bucket>/<CC-MAIN-…>/<rank>.parquet`, zstd."""

    name = "Multi-bucket writer (seed)"
    type = "💽 - WRITER"
    cc_main = re.compile(r"CC-MAIN-\d{4}-\d{2}")

    def __init__(self, base_output_path: Path, compression: str = "zstd"):
        super().__init__()
        self.base_output_path = Path(base_output_path)
        self.compression = compression

    def _dump(self, document: Document) -> str:
        match = self.cc_main.search(document.metadata.get("file_path", ""))
        return match.group(0) if match else "unknown"

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        writers: dict[tuple[str, str], ParquetWriter] = {}
        try:
            for document in data:
                bucket = score_bucket(document.metadata.get("score", 0) or 0)
                if bucket is None:
                    continue
                key = (str(bucket[0]), self._dump(document))
                if key not in writers:
                    folder = self.base_output_path / "en" / key[0] / key[1]
                    writers[key] = ParquetWriter(
                        str(folder), compression=self.compression, adapter=_id_text_score
                    )
                with self.track_time():
                    writers[key].write(document, rank)
                self.stat_update(f"bucket_{key[0]}")
                yield document
        finally:
            for writer in writers.values():
                writer.close()


def seed_executor(files: list[str], output: Path, logs: Path, workers: int) -> LocalPipelineExecutor:
    """One task per source file, `workers` at a time, as the seed's `LocalPipelineExecutor`."""
    folder = Path(files[0]).parents[1]  # <root>/data: the reader's files are relative to it
    relative = [str(Path(f).relative_to(folder)) for f in files]
    logs.mkdir(parents=True, exist_ok=True)
    listing = logs / "input_files.txt"
    listing.write_text("\n".join(relative) + "\n")
    pipeline = [
        ProjectedParquetReader(str(folder), paths_file=str(listing)),
        StratifiedSampler(random_seed=42),
        MultiBucketWriter(output),
    ]
    return LocalPipelineExecutor(pipeline, tasks=len(files), workers=workers, logging_dir=str(logs))
