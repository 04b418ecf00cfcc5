"""The benchmark cases: what each runs (one or more whole processes) and on how much input."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow.parquet as pq

from bench import prepare
from bench.data import BENCH_DUMPS, DataSpec, dump_stats, ensure_dumps, quiet_duckdb
from bench.measure import Measurement
from bench.texts import MULTISCRIPT
from fw_assets.paths import dedup_path

PYTHON = sys.executable
REPO = prepare.REPO
MEMORY_DUMP = "CC-MAIN-2099-01"  # name of the 4N dump: four dumps' files read as one, or generated as one


@dataclass
class Step:
    command: list[str]
    env: dict | None = None
    cwd: Path | None = None


@dataclass
class Case:
    name: str
    label: str
    group: str  # bucketing | tokenizing | memory | fixed
    documents: int  # input documents
    text_bytes: int  # input text, UTF-8 bytes
    steps: list[Step]
    output: Path  # emptied before every run
    fresh_homes: list[Path] = field(default_factory=list)  # DAGSTER_HOMEs made anew every run
    tokens: Callable[[Measurement], int] | None = None


@dataclass
class Bench:
    work: Path
    spec: DataSpec
    dumps: tuple[str, ...]
    cores: int

    @property
    def source(self) -> Path:
        return self.work / "data" / self.spec.key

    def out(self, name: str) -> Path:
        return self.work / "out" / name

    def stats(self, dumps: tuple[str, ...]) -> tuple[int, int]:
        """Documents and text bytes of `dumps`."""
        facts = [dump_stats(self.work, self.spec, d) for d in dumps]
        return sum(f["rows"] for f in facts), sum(f["text_bytes"] for f in facts)


def reset(case: Case) -> None:
    shutil.rmtree(case.output, ignore_errors=True)
    case.output.mkdir(parents=True)
    for home in case.fresh_homes:
        prepare.dagster_home(home)


def datatrove_installed() -> bool:
    return importlib.util.find_spec("datatrove") is not None


def bucketing_cases(bench: Bench) -> list[Case]:
    docs, text = bench.stats(bench.dumps)
    dumps = list(bench.dumps)
    cases = []

    cases.append(_dagster_chain_case(bench))

    out = bench.out("fw_sql")
    cases.append(Case(
        "fw_sql", "fw_assets: the two statements alone (sampled + bucketed)", "bucketing", docs, text,
        [Step([PYTHON, "-m", "bench.cases.fw_sql", "--source", str(bench.source), "--out", str(out),
               "--dumps", *dumps])],
        out,
    ))

    floor = prepare.floor_threshold(bench.work, bench.spec, bench.dumps)
    floor_args = ["--source", str(bench.source), "--dumps", *dumps, "--threshold", str(floor["threshold"])]
    out = bench.out("floor")
    cases.append(Case(
        "floor", "floor: one COPY, same rows, a file per thread", "bucketing", docs, text,
        [Step([PYTHON, "-m", "bench.cases.floor", "--out", str(out), *floor_args])], out,
    ))
    out = bench.out("floor_partitioned")
    cases.append(Case(
        "floor_partitioned", "floor: one COPY, same rows, 4 hive partitions", "bucketing", docs, text,
        [Step([PYTHON, "-m", "bench.cases.floor", "--out", str(out), "--partitions", "4", *floor_args])],
        out,
    ))

    if datatrove_installed():
        out = bench.out("datatrove")
        cases.append(Case(
            "datatrove", f"seed: datatrove Reader -> StratifiedSampler -> MultiBucketWriter, {bench.cores} workers",
            "bucketing", docs, text,
            [Step([PYTHON, "-m", "bench.cases.seed_datatrove", "--source", str(bench.source),
                   "--out", str(out / "data"), "--logs", str(out / "logs"), "--dumps", *dumps,
                   "--workers", str(bench.cores)])],
            out,
        ))
    else:
        print("NOTE: datatrove is not installed (pip install -e '.[bench]'): the seed's pipeline "
              "case and the identical-ids check are skipped.")
    return cases


def _dagster_chain_case(bench: Bench) -> Case:
    """`dagster asset materialize raw,sampled,bucketed`, one process per dump, as users run it."""
    name = "fw_dagster"
    docs, text = bench.stats(bench.dumps)
    out = bench.out(name)
    home = bench.out(f"{name}-home")
    env = prepare.dagster_env(bench.source, out, home)
    steps = [Step(prepare.dagster_command("raw,sampled,bucketed", d), env, home) for d in bench.dumps]
    label = "fw_assets: dagster asset materialize raw,sampled,bucketed, a run per dump"
    return Case(name, label, "bucketing", docs, text, steps, out, fresh_homes=[home])


def fixed_cost_cases(bench: Bench) -> list[Case]:
    """What a run costs before any data: Python importing Dagster, importing fw_assets' code
    location, and the CLI materializing an empty partitioned asset (Dagster's own floor)."""
    dump = bench.dumps[0]
    out = bench.out("fixed")
    imports = [
        ("import_dagster", "python -c 'import dagster'", "import dagster"),
        ("import_definitions", "python -c 'import fw_assets.definitions'", "import fw_assets.definitions"),
    ]
    cases = [
        Case(name, label, "fixed", 0, 0, [Step([PYTHON, "-c", code], cwd=REPO)], out)
        for name, label, code in imports
    ]
    home = bench.out("dagster_empty-home")
    env = prepare.dagster_env(bench.source, out, home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    command = [PYTHON, "-m", "dagster", "asset", "materialize", "-m", "bench.cases.empty_asset",
               "--select", "empty", "--partition", dump]
    cases.append(Case(
        "dagster_empty", f"floor: dagster asset materialize of an empty asset ({dump})", "fixed", 0, 0,
        [Step(command, env, home)], out, fresh_homes=[home],
    ))
    return cases


def tokenized_asset_exists() -> bool:
    """Whether the code location defines the `tokenized` asset yet (checked in a subprocess:
    loading the definitions imports all of Dagster)."""
    probe = "from fw_assets.definitions import defs; import dagster as dg; " \
            "print(any(k == dg.AssetKey('tokenized') for k in defs.resolve_asset_graph().get_all_asset_keys()))"
    completed = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True)
    return completed.returncode == 0 and completed.stdout.strip().endswith("True")


def bucketed_texts(published: Path, dump: str) -> list[str]:
    return sorted(str(p) for p in published.glob(f"en/*/{dump}/*.parquet"))


def token_files_tokens(root: Path, dump: str) -> tuple[int, int]:
    """Documents and tokens (end-of-document tokens not counted) of a dump's token files."""
    from fw_assets.formats.indexed_dataset import IndexedDatasetReader

    documents = tokens = 0
    for idx in root.glob(f"tokenized/*/*/{dump}.idx"):
        reader = IndexedDatasetReader(Path(str(idx)[: -len(".idx")]))
        documents += reader.document_count
        tokens += reader.token_count
    return documents, tokens - documents


def tokenizing_cases(bench: Bench) -> list[Case]:
    dump = bench.dumps[0]
    published = prepare.published_buckets(bench.work, bench.spec, bench.source, dump)
    files = bucketed_texts(published, dump)
    docs = sum(pq.read_metadata(f).num_rows for f in files)
    text = _text_bytes(files)
    cases = []
    if tokenized_asset_exists():

        def tokens_written(_: Measurement) -> int:
            return token_files_tokens(published, dump)[1]

        for name, backend in (("tokenized", "auto"), ("tokenized_tiktoken", "tiktoken")):
            home = bench.out(f"{name}-home")
            env = prepare.dagster_env(bench.source, published, home)
            config = ["--config-json", json.dumps({"resources": {"tokenizer": {"config": {"backend": backend}}}})]
            cases.append(Case(
                name, f"fw_assets: dagster asset materialize tokenized ({dump}), backend {backend}",
                "tokenizing", docs, text, [Step([*prepare.dagster_command("tokenized", dump), *config], env, home)],
                published / "tokenized", fresh_homes=[home], tokens=tokens_written,
            ))
    else:
        print("NOTE: fw_assets.definitions has no `tokenized` asset yet: only the tokenizer's own "
              "loop is measured.")
    kept = ["--decisions", str(dedup_path(published, dump))]  # the texts tokenized encodes
    for processes in sorted({1, bench.cores}):
        out = bench.out(f"tiktoken_{processes}")
        cases.append(Case(
            f"tiktoken_{processes}", f"tiktoken cl100k encode_ordinary loop, {processes} process(es)",
            "tokenizing", docs, text,
            [Step([PYTHON, "-m", "bench.cases.tiktoken_loop", "--processes", str(processes), *kept, *files])],
            out, tokens=lambda m: m.facts["tokens"],
        ))
    return cases + encoder_cases(bench, [*kept, *files], docs, text)


ENCODERS = ("fastokens", "tiktoken", "tiktoken_batch")


def encoder_cases(bench: Bench, kept: list[str], docs: int, text: int) -> list[Case]:
    """Each cl100k encoder alone in one process, on the dump's kept texts (`kept`: its arguments),
    named after their kind, and on as many documents of random multi-script text (unless that is
    the dump's kind)."""
    sets = {bench.spec.texts: kept}
    sets.setdefault(MULTISCRIPT, ["--multiscript", str(docs)])
    cases = []
    for texts, arguments in sets.items():
        for encoder in ENCODERS:
            name = f"encoder_{encoder}_{texts}"
            threads = " (threads: all cores)" if encoder.endswith("batch") else ""
            cases.append(Case(
                name, f"{encoder} alone on {texts}{threads}",
                "tokenizing", docs, text if arguments is kept else 0,
                [Step([PYTHON, "-m", "bench.cases.encoders", "--encoder", encoder, *arguments])],
                bench.out(name), tokens=lambda m: m.facts["tokens"],
            ))
    return cases


def _text_bytes(files: list[str]) -> int:
    with quiet_duckdb() as con:
        (total,) = con.execute("SELECT sum(strlen(text)) FROM read_parquet($f)", {"f": files}).fetchone()
    return int(total or 0)


def memory_cases(bench: Bench) -> list[Case]:
    """Each fw_assets step on its own at N (one dump) and 4N (four dumps read as one dump), with
    fw_assets' default memory limit and with DuckDB's own (80 % of RAM)."""
    sizes = {"N": (BENCH_DUMPS[0],), "4N": BENCH_DUMPS[:4]}
    cases = []
    for size, dumps in sizes.items():
        docs, text = bench.stats(dumps)
        for limit, limit_arg in (("default", ""), ("duckdb", "none")):
            out = bench.out(f"memory_{size}_{limit}")
            merged = ["--as", MEMORY_DUMP] if len(dumps) > 1 else []
            base = [PYTHON, "-m", "bench.cases.fw_sql", "--source", str(bench.source), "--out", str(out),
                    "--dumps", *dumps, *merged, "--memory-limit", limit_arg]
            for step, output in (("sampled", out), ("bucketed", out / "buckets")):
                # bucketed reads the selection the `sampled` case before it wrote in this run
                cases.append(Case(
                    f"{step}_{size}_{limit}", f"{step} alone, {size} = {docs:,} docs, memory limit: {limit}",
                    "memory", docs, text, [Step([*base, "--step", step])], output,
                ))
    if tokenized_asset_exists():
        cases += _tokenized_4n_cases(bench)
    return cases


def _tokenized_4n_cases(bench: Bench) -> list[Case]:
    """The tokenized step (through Dagster) on the 4N dump's buckets, with the default backend
    under both memory limits and with tiktoken alone (today's step, the memory baseline); at N it
    is the tokenizing group's `tokenized` case."""
    # one real dump four times larger (a merge of the four dumps' files would fail raw's contract:
    # their rows name their own dumps), generated and run through the chain once, untimed
    spec = replace(bench.spec, rows=4 * bench.spec.rows, files=4 * bench.spec.files)
    source = ensure_dumps(bench.work, spec, (MEMORY_DUMP,))
    published = prepare.published_buckets(bench.work, spec, source, MEMORY_DUMP)
    files = bucketed_texts(published, MEMORY_DUMP)
    docs, text = sum(pq.read_metadata(f).num_rows for f in files), _text_bytes(files)
    cases = []
    variants = (("default", None, "auto"), ("duckdb", "none", "auto"), ("tiktoken", None, "tiktoken"))
    for name, memory_limit, backend in variants:
        home = bench.out(f"tokenized_4N_{name}-home")
        resources = {"tokenizer": {"config": {"backend": backend}}}
        if memory_limit:
            resources["warehouse"] = {"config": {"memory_limit": memory_limit}}
        limit = "duckdb" if memory_limit else "default"
        cases.append(Case(
            f"tokenized_4N_{name}",
            f"tokenized, 4N = {docs:,} kept docs, memory limit: {limit}, backend {backend}", "memory",
            docs, text,
            [Step([*prepare.dagster_command("tokenized", MEMORY_DUMP), "--config-json",
                   json.dumps({"resources": resources})], prepare.dagster_env(source, published, home), home)],
            published / "tokenized", fresh_homes=[home],
            tokens=lambda _: token_files_tokens(published, MEMORY_DUMP)[1],
        ))
    return cases


def memory_limit_label() -> str:
    from fw_assets.resources import default_memory_limit

    return default_memory_limit()


def machine() -> dict:
    import platform

    import psutil

    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_model": model,
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
    }
