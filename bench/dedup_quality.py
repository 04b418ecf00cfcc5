"""How well a dedup finds the generator's planted near-duplicates, and datatrove's score on them.

    python -m bench.dedup_quality --root DIR [--rows 2000] [--dumps D1 D2 D3] [--seed 0]
        [--paragraph-share 0.05]

Generates the dumps (ground truth in ROOT/planted/), runs datatrove's own four MinHash stages
(signatures, buckets, cluster, filter; its defaults: word 5-grams, 14 x 8, spaCy words) over all
their rows, and prints the share of planted pairs it leaves with at most one document kept. The
dedup tests compare fw_assets against this number measured on the same rows.
"""

import argparse
import itertools
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow.parquet as pq

from fw_assets.paths import planted_truth_path
from fw_assets.synthetic.generator import write_sample_dumps

DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2013-48", "CC-MAIN-2014-10")
PARAGRAPH_SHARE = 0.05  # short pages sharing a boilerplate paragraph: the trap for unverified LSH


def planted_pairs(root: Path, dumps: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair of ids (over all `dumps`) that copy the same template."""
    by_template: dict[int, list[str]] = {}
    for dump in dumps:
        truth = pq.read_table(planted_truth_path(root, dump)).to_pydict()
        for doc, template in zip(truth["id"], truth["template"]):
            by_template.setdefault(template, []).append(doc)
    return [pair for ids in by_template.values() for pair in itertools.combinations(sorted(ids), 2)]


def caught_share(pairs: Sequence[tuple[str, str]], kept: Iterable[str]) -> float:
    """Share of pairs of which at most one document is kept."""
    kept = set(kept)
    return sum(1 for a, b in pairs if not (a in kept and b in kept)) / len(pairs)


def datatrove_kept_ids(
    root: Path, work: Path, tasks: int = 1, workers: int = 1
) -> tuple[set[str], list[float]]:
    """Ids datatrove's four MinHash stages (its defaults) keep, over every row under `root/data`
    taken together (`workers` processes in each stage), and each stage's wall seconds."""
    from datatrove.executor import LocalPipelineExecutor

    from bench.datatrove_minhash import datatrove_pipelines, kept_ids

    seconds = []
    for i, (pipeline, stage_tasks) in enumerate(datatrove_pipelines(root / "data", work, tasks)):
        began = time.perf_counter()
        LocalPipelineExecutor(
            pipeline, tasks=stage_tasks, workers=min(workers, stage_tasks), logging_dir=str(work / f"logs{i}")
        ).run()
        seconds.append(time.perf_counter() - began)
    return kept_ids(work), seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dedup_quality")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--dumps", nargs="+", default=list(DUMPS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--paragraph-share", type=float, default=PARAGRAPH_SHARE)
    args = parser.parse_args(argv)
    write_sample_dumps(
        args.root, args.dumps, rows_per_dump=args.rows, seed=args.seed, paragraph_share=args.paragraph_share
    )
    pairs = planted_pairs(args.root, args.dumps)
    with tempfile.TemporaryDirectory() as work:
        kept, _ = datatrove_kept_ids(args.root, Path(work))
    total = args.rows * len(args.dumps)
    print(f"{len(pairs)} planted pairs; datatrove keeps {len(kept)} of {total} documents;"
          f" pairs with at most one kept: {caught_share(pairs, kept):.4f}")


if __name__ == "__main__":
    main()
