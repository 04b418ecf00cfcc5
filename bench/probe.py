"""Probe documents per CPU-second beside `tokenized`'s, on one generated dump with probe plants.

    python -m bench.probe                       # 20,000 rows, the built-in probe and a tiny GPT-2
    python -m bench.probe --rows 100000 --model DIR

Runs the chain once, then, each through Dagster in this process: `tokenized` (one encoder
worker), `probe_loss` with the built-in probe, and `probe_loss` with a model probe (a 1-layer
GPT-2 built on the spot, as the tests build it, unless `--model` names one; skipped without the
`probe` extra). CPU time
is this process's and its waited-for children's (the encoder's worker). Prints a markdown table.
"""

import argparse
import importlib.util
import resource
import tempfile
import time
from pathlib import Path

import dagster as dg

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.bucketing.raw import raw
from fw_assets.bucketing.sampled import sampled
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.lib.markdown import table
from fw_assets.probe.probe_loss import probe_loss
from fw_assets.probe.resources import ProbeResource
from fw_assets.resources import FineWebStorage, Warehouse
from fw_assets.synthetic import write_sample_dump
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized

DUMP = "CC-MAIN-2013-20"
CHAIN = [raw, sampled, bucketed, minhash, deduplicated]


def materialize_dump(source: Path, output: Path, dump: str, assets: list, extra_resources: dict | None = None):
    storage = FineWebStorage(source_dir=str(source), output_dir=str(output))
    resources = {"storage": storage, "warehouse": Warehouse(), **(extra_resources or {})}
    return dg.materialize(assets, partition_key=dump, resources=resources)


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measured(label: str, run) -> tuple:
    cpu, wall = cpu_seconds(), time.monotonic()
    result = run()
    cpu, wall = cpu_seconds() - cpu, time.monotonic() - wall
    (materialization,) = [m for m in result.get_asset_materialization_events()][-1:]
    documents = materialization.materialization.metadata["documents"].value
    return (label, documents, round(wall, 2), round(cpu, 2), round(documents / cpu))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.probe", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--model", type=Path, help="a local causal LM directory (default: a tiny GPT-2)")
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        source, output = Path(work) / "source", Path(work) / "output"
        write_sample_dump(source, DUMP, rows=args.rows, files=2, seed=0, probe_plant_share=0.015)
        tokenizer = {"tokenizer": TokenizerResource(workers=1)}
        materialize_dump(source, output, DUMP, CHAIN)
        rows = [measured("tokenized (cl100k, 1 worker)", lambda: materialize_dump(
            source, output, DUMP, [tokenized], extra_resources=tokenizer))]
        rows.append(measured("probe_loss, built-in bigram", lambda: materialize_dump(
            source, output, DUMP, [probe_loss], extra_resources={"probe": ProbeResource()})))
        if args.model or importlib.util.find_spec("transformers"):
            from bench.tiny_model import save_tiny_model

            model = args.model or save_tiny_model(Path(work) / "tiny-gpt2")
            probe = ProbeResource(model_dir=str(model), max_tokens=args.max_tokens, batch_tokens=8 * args.max_tokens)
            rows.append(measured(
                f"probe_loss, {model.name} (max {args.max_tokens} tokens, cpu)",
                lambda: materialize_dump(source, output, DUMP, [probe_loss], extra_resources={"probe": probe})))
        else:
            print("transformers is not installed (the `probe` extra): the model probe was not measured")
    print(table(["step", "documents", "wall s", "CPU s", "documents / CPU s"], rows))


if __name__ == "__main__":
    main()
