"""The tokenized step's work without Dagster's start, phase by phase: encoding, ordering by id.

    python -m bench.tokenized_steps --output DIR [--dump CC-MAIN-2013-20] [--workers 2]
                                    [--batch-rows 1000] [--backend auto]

DIR is an output root where `bucketed` and the dump's dedup decisions are published: the
tokenizing group of `bench.run` prepares one, `bench/work/prepared/<data>/published-dedup-*/`.
The token files go to a temporary folder. Peak RSS is this process and its children's, sampled
every 50 ms; the seconds are the sum over buckets (ordering overlaps the next bucket's encoding).
"""

import argparse
import tempfile
import threading
import time
from pathlib import Path

import psutil

from fw_assets.formats.indexed_dataset import optimal_token_dtype
from fw_assets.paths import bucketed_files, dedup_path
from fw_assets.resources import Warehouse
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.tokenizing.contract import kept_per_bucket
from fw_assets.tokenizing.encode import ParallelEncoder
from fw_assets.tokenizing.oracle import OracleSample
from fw_assets.tokenizing.token_progress import TokenProgress
from fw_assets.tokenizing.tokenize_buckets import BucketInput, TokenFormat, tokenize_buckets
from fw_assets.tokenizing.tokenizer import TokenizerSpec


class PeakMemory:
    """The largest RSS of this process and its children while in the `with` block."""

    def __init__(self) -> None:
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._done.wait(0.05):
            tree = [me, *me.children(recursive=True)]
            self.peak = max(self.peak, sum(_rss(process) for process in tree))

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()


def _rss(process: psutil.Process) -> int:
    try:
        return process.memory_info().rss
    except psutil.NoSuchProcess:
        return 0


def bucket_inputs(output: Path, dump: str, out: Path) -> list[BucketInput]:
    decisions = dedup_path(output, dump)
    kept = kept_per_bucket(decisions)
    buckets = []
    for bucket, files in bucketed_files(output, dump, SEED_POLICY).items():
        if kept.get(bucket):
            (out / bucket).mkdir(parents=True)
            buckets.append(BucketInput(bucket, files, kept[bucket], out / bucket / dump, decisions))
    return buckets


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tokenized_steps")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--dump", default="CC-MAIN-2013-20")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-rows", type=int, default=1000)
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tokenized-steps-") as folder, PeakMemory() as memory:
        began, cpu = time.perf_counter(), time.process_time()
        buckets = bucket_inputs(args.output, args.dump, Path(folder) / "out")
        spec = TokenizerSpec(backend=args.backend)
        tokenizer = spec.reference().load()
        documents = sum(bucket.documents for bucket in buckets)
        token_format = TokenFormat(optimal_token_dtype(tokenizer.vocab_size), tokenizer.eod_id)
        with (
            ParallelEncoder(spec, args.workers) as encoder,
            Warehouse(threads=args.workers).connect(Path(folder) / "spill") as con,
        ):
            started = time.perf_counter()
            written = tokenize_buckets(
                con, buckets, encoder, OracleSample(tokenizer.oracle(), args.backend, documents),
                token_format, args.batch_rows, TokenProgress(lambda line: None, "", documents),
                lambda line: None, args.dump, Path(folder) / "scratch",
            )
            placement = encoder.placement()
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    encoding = sum(w.encoding_seconds for w in written.values())
    ordering = sum(w.ordering_seconds for w in written.values())
    print("| backend | documents | tokens | start s | encoding s | ordering s | wall s | CPU s (this process) "
          "| peak RSS GiB |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    print(
        f"| {args.backend}, {placement} | {sum(w.documents for w in written.values()):,} | "
        f"{sum(w.tokens for w in written.values()):,} | {started - began:.2f} | {encoding:.2f} | "
        f"{ordering:.2f} | {wall:.2f} | {cpu:.1f} | {memory.peak / 2**30:.2f} |"
    )


if __name__ == "__main__":
    main()
