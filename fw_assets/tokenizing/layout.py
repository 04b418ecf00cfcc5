"""Where token files live: `<output_root>/tokenized/<tokenizer>/<bucket>/<dump>.{bin,idx}` and
`<dump>.docs.parquet` beside them."""

from pathlib import Path

from fw_assets.tokenizing.doc_index import docs_path
from fw_assets.tokenizing.indexed_dataset import bin_path, idx_path


def tokenizer_dir(output_root: Path, tokenizer_name: str) -> Path:
    """Every token file one tokenizer wrote; the folder is named by the tokenizer's identity."""
    return output_root / "tokenized" / tokenizer_name


def token_prefix(output_root: Path, tokenizer_name: str, bucket: str, dump: str) -> Path:
    """The Megatron data prefix of one (tokenizer, bucket, dump): `.../<bucket>/<dump>`."""
    return tokenizer_dir(output_root, tokenizer_name) / bucket / dump


def token_files(prefix: Path) -> list[Path]:
    """The files of one token output, all published together: `.bin`, `.idx`, `.docs.parquet`."""
    return [bin_path(prefix), idx_path(prefix), docs_path(prefix)]
