"""Benchmark fw_assets against the hardware floor, the seed's datatrove pipeline and the tokenizer.

    python -m bench.run                      # default: 2 dumps of 1,000,000 documents, 3 runs
    python -m bench.run --rows 100000 --runs 1 --groups bucketing
    python -m bench.run --rows 1000000 --dumps 1 --groups tokenizing --texts bigram
    python -m bench.run --groups scale --rows 4000000 --files 22    # every step end to end (bench/scale.py)

Generates FineWeb-Edu-shaped dumps once (cached in bench/work/data/), runs every case as a whole
process, `--runs` times, interleaved (run 1 of every case, then run 2, ...), checks that
fw_assets and datatrove chose the same ids per bucket and dump, and prints one table (also
written to bench/results/<time>.md and .json). See docs/benchmarks.md.
"""

import argparse
import datetime as dt
import json
import os
from pathlib import Path

from bench.data import BENCH_DUMPS, DataSpec, ensure_dumps
from bench.data_shape import dump_shape, shape_table
from bench.measure import combine, measure
from bench.report import Result, results_table, targets, targets_table
from bench.scale import add_scale_arguments, print_table, run_size, spec_of
from bench.suite import (
    Bench,
    Case,
    bucketing_cases,
    fixed_cost_cases,
    machine,
    memory_cases,
    memory_limit_label,
    reset,
    tokenizing_cases,
)
from bench.texts import PARAGRAPHS, TEXT_KINDS
from bench.verify import compare_ids, parquet_rows, published_layout, staging_layout
from fw_assets.lib.cores import usable_cores
from fw_assets.paths import source_dump_dir

REPO = Path(__file__).resolve().parents[1]
GROUPS = ("bucketing", "tokenizing", "memory", "fixed")
SCALE = "scale"  # bench/scale.py: its own chain of steps, run alone and never by default


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="documents per dump (default 1,000,000)")
    parser.add_argument("--files", type=int, default=4, help="parquet files per dump (default 4)")
    parser.add_argument("--dumps", type=int, default=2, choices=range(1, 5), help="dumps bucketed (default 2)")
    parser.add_argument("--runs", type=int, default=3, help="runs of every case; the median is reported")
    parser.add_argument("--seed", type=int, default=0, help="generator seed of the data")
    parser.add_argument("--texts", default=PARAGRAPHS, choices=TEXT_KINDS,
                        help="the dumps' texts: the synthetic generator's, word-bigram chains of English "
                             "or random multi-script words (bench/texts.py)")
    parser.add_argument("--groups", default=",".join(GROUPS),
                        help=f"comma-separated subset of {','.join(GROUPS)}; or {SCALE} alone")
    add_scale_arguments(parser, prefix=f"{SCALE} only: ")
    parser.add_argument("--keep", action="store_true", help=f"{SCALE} only: keep the data and outputs")
    parser.add_argument("--cases", default="", help="comma-separated case names to keep (default: all)")
    parser.add_argument("--work", type=Path, default=REPO / "bench" / "work", help="data and scratch folder")
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args(argv)
    args.groups = [g for g in args.groups.split(",") if g]
    if SCALE in args.groups and args.groups != [SCALE]:
        parser.error(f"{SCALE} runs alone: --groups {SCALE}")
    unknown = set(args.groups) - set(GROUPS) - {SCALE}
    if unknown:
        parser.error(f"unknown groups {sorted(unknown)}; choose from {GROUPS}")
    return args


def plan(bench: Bench, groups: list[str], names: list[str]) -> list[Case]:
    builders = {
        "bucketing": bucketing_cases, "tokenizing": tokenizing_cases, "memory": memory_cases,
        "fixed": fixed_cost_cases,
    }
    cases = [case for group in groups for case in builders[group](bench)]
    return [c for c in cases if not names or c.name in names]


def run_cases(cases: list[Case], runs: int, logs: Path) -> tuple[list[Result], list[float]]:
    results = {case.name: Result(case, []) for case in cases}
    loads = []
    for run in range(1, runs + 1):
        for case in cases:
            reset(case)
            os.sync()  # the last run's output is on disk before this one starts writing
            loads.append(os.getloadavg()[0])
            parts = [
                measure(step.command, logs / f"{case.name}-run{run}-step{i}.log", step.env, step.cwd)
                for i, step in enumerate(case.steps)
            ]
            measured = combine(parts)
            results[case.name].runs.append(measured)
            print(f"run {run}/{runs} {case.name:<22} {measured.seconds:8.1f} s  "
                  f"cpu {measured.cpu_seconds:7.1f} s  peak {measured.peak_rss / 2**30:5.2f} GiB  "
                  f"(load {loads[-1]:.1f})", flush=True)
    return list(results.values()), loads


def checks(bench: Bench, by_name: dict[str, Result]) -> list[str]:
    """Cross-checks of the last run's outputs, as report lines."""
    lines = []
    sides = {
        "fw_dagster": published_layout(bench.out("fw_dagster")),
        "fw_sql": staging_layout(bench.out("fw_sql")),
        "datatrove": published_layout(bench.out("datatrove") / "data"),
    }
    pairs = [("fw_dagster", "datatrove"), ("fw_sql", "datatrove"), ("fw_dagster", "fw_sql")]
    for a, b in pairs:
        if a in by_name and b in by_name:
            compared, problems = compare_ids(sides[a], sides[b], bench.dumps)
            verdict = "identical" if not problems else "DIFFERENT: " + "; ".join(problems)
            lines.append(f"ids per bucket and dump, {a} vs {b}: {verdict} ({compared:,} rows compared)")
    if "tokenized" in by_name and "tiktoken_1" in by_name:
        written = by_name["tokenized"].case.tokens(by_name["tokenized"].runs[-1])
        counted = by_name["tiktoken_1"].runs[-1].facts["tokens"]
        same = "same" if written == counted else "DIFFERENT"
        lines.append(f"tokens (end-of-document tokens aside), tokenized vs tiktoken loop: "
                     f"{written:,} vs {counted:,} ({same})")
    for texts in TEXT_KINDS:
        digests = {r.case.name: r.runs[-1].facts["tokens_sha256"] for name, r in by_name.items()
                   if name.startswith("encoder_") and name.endswith(f"_{texts}")}
        if len(digests) > 1:
            same = "same" if len(set(digests.values())) == 1 else "DIFFERENT"
            lines.append(f"tokens of every document, {' vs '.join(digests)}: {same}")
    if "fw_sql" in by_name:
        kept = parquet_rows(bench.out("fw_sql") / "buckets")
        for floor in ("floor", "floor_partitioned"):
            if floor in by_name:
                rows = parquet_rows(bench.out(floor))
                same = "same" if rows == kept else "DIFFERENT"
                lines.append(f"rows written, {floor} vs fw_sql: {rows:,} vs {kept:,} ({same})")
    return lines


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.groups == [SCALE]:
        spec = spec_of(args, args.rows)
        run_size(spec, args.work / SCALE, args.results, args.keep)
        print_table(args.results)
        return
    data = DataSpec(args.rows, args.files, args.seed, args.texts)
    bench = Bench(args.work, data, BENCH_DUMPS[: args.dumps], usable_cores())  # the seed's workers, too
    needed = BENCH_DUMPS[:4] if "memory" in args.groups else bench.dumps
    ensure_dumps(bench.work, bench.spec, needed)
    shapes = [dump_shape(source_dump_dir(bench.source, dump)) for dump in bench.dumps]
    cases = plan(bench, args.groups, [n for n in args.cases.split(",") if n])
    if not cases:
        raise SystemExit("no case selected")
    started = dt.datetime.now()
    logs = args.work / "logs" / started.strftime("%Y%m%d-%H%M%S")
    print(f"{len(cases)} cases × {args.runs} runs on {bench.spec.key}, dumps {', '.join(bench.dumps)}; logs in {logs}")
    results, loads = run_cases(cases, args.runs, logs)
    by_name = {r.case.name: r for r in results}
    from fw_assets.resources import default_memory_limit_bytes

    found = targets(by_name, bench.cores, default_memory_limit_bytes(), bench.spec.texts)
    host = machine()
    text = "\n\n".join([
        f"# fw_assets benchmark, {started:%Y-%m-%d %H:%M}",
        f"Machine: {host['cpu_model']}, {host['cores']} cores, {host['memory_gib']} GiB; Python {host['python']}. "
        f"Data: {bench.spec.key} ({', '.join(bench.dumps)}), {args.runs} runs per case, median reported. "
        f"1-minute load average before each case run: {min(loads):.1f}–{max(loads):.1f}. "
        f"fw_assets' default DuckDB memory limit: {memory_limit_label()}.",
        "Data shape (bench/data_shape.py):\n\n" + shape_table(shapes),
        results_table(results),
        targets_table(found) if found else "",
        "\n".join(f"- {line}" for line in checks(bench, by_name)),
    ])
    print("\n" + text)
    args.results.mkdir(parents=True, exist_ok=True)
    stem = args.results / started.strftime("%Y%m%d-%H%M%S")
    stem.with_suffix(".md").write_text(text + "\n")
    stem.with_suffix(".json").write_text(json.dumps({
        "machine": host, "data": bench.spec.key, "dumps": bench.dumps, "shapes": shapes, "loads": loads,
        "cases": {r.case.name: {"label": r.case.label, "documents": r.case.documents,
                                "text_bytes": r.case.text_bytes,
                                "runs": [m.as_dict() for m in r.runs]} for r in results},
        "targets": [t.__dict__ | {"met": t.met} for t in found],
    }, indent=1))
    print(f"\nwritten: {stem}.md, {stem}.json")


if __name__ == "__main__":
    main()
