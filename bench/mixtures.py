"""Mixture indexes at scale: fw_assets against Megatron-Core's own builder, same recipe, same files.

    python -m bench.mixtures                         # 440 prefixes, 600B tokens of data, 1T to train
    python -m bench.mixtures --dumps 10 --data-tokens 2e9 --recipe my.yaml

Generates the token files once (bench/work/mixtures/), then runs, each as a whole process with a
fresh cache folder: Megatron-Core's `BlendedMegatronDatasetBuilder` (single process, as rank 0
does at the start of training), and fw_assets' plan + build with 1 and with `--workers`
processes. Checks that every fw_assets cache is byte-identical to Megatron's, and prints a
table (also in bench/results/mixtures-<time>.md and .json). See docs/benchmarks.md.
"""

import argparse
import datetime as dt
import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.measure import measure
from bench.mixture_data import bench_dumps, ensure_token_files
from bench.suite import machine

ROOT = Path(__file__).parent
SHIPPED_RECIPE = ROOT.parent / "fw_assets" / "mixtures" / "fineweb_edu_1t.yaml"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dumps", type=int, default=110)
    parser.add_argument("--data-tokens", type=float, default=6e11)
    parser.add_argument("--recipe", type=Path, default=SHIPPED_RECIPE)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--work", type=Path, default=ROOT / "work" / "mixtures")
    args = parser.parse_args()

    output_root = args.work / "out"
    dumps = bench_dumps(args.dumps)
    data = ensure_token_files(output_root, dumps, args.data_tokens)
    print(f"data: {data}", flush=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT.parent)}
    common = [str(output_root), str(args.recipe)]
    reference = args.work / "cache-megatron"
    results = {"machine": machine(), "data": data, "recipe": str(args.recipe), "cases": {}}
    cases = [("megatron-core builder, 1 process", "bench.cases.mixture_megatron", reference, [])]
    for workers in sorted({1, args.workers}):
        cases.append((f"fw_assets plan + build, {workers} process(es)", "bench.cases.mixture_ours",
                      args.work / f"cache-ours-{workers}", ["--workers", str(workers)]))
    for label, module, cache, extra in cases:
        shutil.rmtree(cache, ignore_errors=True)
        subprocess.run(["sync"], check=True)
        command = [sys.executable, "-m", module, *common, str(cache), *dumps, *extra]
        result = measure(command, args.work / "logs" / f"{cache.name}.log", env=env).as_dict()
        if cache != reference:
            result["identical_to_megatron"] = _identical(reference, cache)
            shutil.rmtree(cache)
        results["cases"][label] = result
        print(label, json.dumps(result), flush=True)
    shutil.rmtree(reference)
    _write(results)


def _identical(reference: Path, cache: Path) -> bool:
    names = sorted(os.listdir(reference))
    if names != sorted(os.listdir(cache)):
        return False
    _, mismatch, errors = filecmp.cmpfiles(reference, cache, names, shallow=False)
    return not mismatch and not errors


def _write(results: dict) -> None:
    lines = ["| case | s | CPU s | peak RSS GiB | identical to Megatron |", "|---|--:|--:|--:|---|"]
    for label, r in results["cases"].items():
        same = {True: "yes", False: "NO"}.get(r.get("identical_to_megatron"), "(reference)")
        lines.append(f"| {label} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | {r['peak_rss'] / 2**30:.2f} "
                     f"| {same} |")
    table = "\n".join(lines)
    print(table)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    out = ROOT / "results"
    out.mkdir(exist_ok=True)
    (out / f"mixtures-{stamp}.json").write_text(json.dumps(results, indent=2))
    (out / f"mixtures-{stamp}.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
