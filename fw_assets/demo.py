"""Run the whole chain on generated sample dumps, as a user would from the CLI, and summarise it.

    python -m fw_assets.demo [--rows N] [--dumps DUMP ...]

Sample dumps go to `data/sample/fineweb-edu` (FW_SOURCE_DIR), outputs to `data/sample/fineweb`
(FW_OUTPUT_DIR), unless those variables are set; run history goes to a Dagster instance of the
demo's own beside its output folder (`data/sample/fineweb.dagster/`, the repo's dagster.yaml with
its folders there): one instance belongs to one output folder, so the history of the operating
shell's instance (`DAGSTER_HOME`) stays that of the real outputs. The dumps plant near-gibberish
and legal-register pages in the top bucket (PROBE_PLANT_SHARE). Each dump, in crawl order, is one
`dagster asset materialize --select group:fineweb_edu,group:fineweb_edu_kept,probe_loss --partition
<dump>` process started from the repo root (the chain, then the built-in probe's losses); then
the shipped mixture recipes `demo` (its top source reweighted by those losses) and `curriculum` are
built over them (`--select 'mixture_plan*' --partition <recipe>`) and their plans printed, with what
the reweighting did to the plants.
"""

import argparse
import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from fw_assets import settings
from fw_assets.formats.doc_index import read_document_index
from fw_assets.lib.markdown import table
from fw_assets.mixtures.contract import member_figures
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import split_documents
from fw_assets.mixtures.megatron.blended_megatron_dataset_config import split_matrix
from fw_assets.mixtures.published import planned_stages, read_plan
from fw_assets.mixtures.report import megatron_args_text, source_table, stage_table
from fw_assets.partitions import KEPT_GROUP, SIGNING_GROUP
from fw_assets.paths import (
    bucket_dump_dir,
    dedup_path,
    loss_picture_path,
    mixture_dir,
    packed_root,
    planted_probe_truth_path,
    probe_loss_path,
    report_path,
    shares_picture_path,
    source_data_dir,
    source_dump_dir,
    token_prefix,
    tokenized_root,
)
from fw_assets.probe.probes import BUILTIN
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.synthetic import DEFAULT_DUMPS, write_sample_dump

REPO = Path(__file__).resolve().parents[1]
SAMPLE_SOURCE = Path("data/sample/fineweb-edu")
SAMPLE_OUTPUT = Path("data/sample/fineweb")
DEMO_RECIPE = "demo"  # fw_assets/mixtures/demo.yaml, over the two default sample dumps
REWEIGHTED_SOURCE = "top"  # the demo recipe's source with `reweight:`
# planted pages per generated row, of each kind (gibberish, contract): at 20,000 rows a dump about
# 70 of each in the two dumps' ~1,100 kept top-bucket documents
PROBE_PLANT_SHARE = 0.002
CURRICULUM_RECIPE = "curriculum"  # fw_assets/mixtures/curriculum.yaml: three phases, six stages
DAGSTER_HOME = "DAGSTER_HOME"
# the settings a printed command carries, so that it reads what the demo wrote from a fresh shell
PRINTED_SETTINGS = (settings.SOURCE_DIR_ENV, settings.OUTPUT_DIR_ENV, settings.MIXTURES_DIR_ENV, DAGSTER_HOME)


def demo_environment() -> dict[str, str]:
    """The user's environment, with the sample folders as defaults and the demo's own instance
    (`instance_home`) as DAGSTER_HOME, whatever it was."""
    env = dict(os.environ)
    env.setdefault(settings.SOURCE_DIR_ENV, str((REPO / SAMPLE_SOURCE).resolve()))
    env.setdefault(settings.OUTPUT_DIR_ENV, str((REPO / SAMPLE_OUTPUT).resolve()))
    env[DAGSTER_HOME] = str(instance_home(Path(env[settings.OUTPUT_DIR_ENV])))
    return env


def instance_home(output: Path) -> Path:
    """The demo's Dagster instance: beside its output folder, one instance for that folder."""
    output = output.resolve()
    return output.parent / f"{output.name}.dagster"


def write_instance_yaml(home: Path) -> Path:
    """The repo's dagster.yaml in `home` (a DAGSTER_HOME), its relative `.dagster/` folders moved
    under that home, so that whatever folder a command starts in, its history lands there."""

    def anchored(node):
        if isinstance(node, dict):
            return {key: anchored_value(key, value) for key, value in node.items()}
        return node

    def anchored_value(key, value):
        relative_folder = key == "base_dir" and not Path(value).is_absolute()
        return str(home / value) if relative_folder else anchored(value)

    config = yaml.safe_load((REPO / "dagster.yaml").read_text())
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    path.write_text(yaml.safe_dump(anchored(config), sort_keys=False))
    return path


def command_line(env: dict[str, str], *args: str) -> str:
    """A command to paste into a fresh shell: the demo's settings, then this Python (the venv the
    demo ran in) with `args`."""
    assignments = [f"{name}={shlex.quote(env[name])}" for name in PRINTED_SETTINGS if env.get(name)]
    return " ".join([*assignments, shlex.quote(sys.executable), *map(shlex.quote, args)])


def ensure_sample_dumps(source: Path, dumps: list[str], rows: int) -> None:
    for dump in dumps:
        if list(source_dump_dir(source, dump).glob("*.parquet")):
            continue
        started = time.monotonic()
        write_sample_dump(source, dump, rows=rows, files=2, seed=0, probe_plant_share=PROBE_PLANT_SHARE)
        print(f"generated {dump}: {rows:,} rows in {time.monotonic() - started:.1f}s")


def materialize(select: str, partition: str, env: dict[str, str], log_dir: Path) -> None:
    """Materialize `select` for one partition through the Dagster CLI; exit with its log on failure."""
    log = log_dir / f"{partition}.log"
    command = [sys.executable, "-m", "dagster", "asset", "materialize",
               "-m", "fw_assets.definitions", "--select", select, "--partition", partition]
    started = time.monotonic()
    with open(log, "w") as out:
        finished = subprocess.run(command, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    if finished.returncode != 0:
        print(log.read_text()[-4000:])
        sys.exit(f"{partition}: materialization failed (full log: {log})")
    print(f"materialized {partition} in {time.monotonic() - started:.1f}s (log: {log})")


def bucket_summary(output: Path, dumps: list[str]) -> str:
    rows = []
    for bucket in SEED_POLICY.buckets:
        for dump in dumps:
            files = sorted(bucket_dump_dir(output, bucket.name, dump).glob("*.parquet"))
            rows.append((
                bucket.name, dump, len(files),
                sum(pq.read_metadata(f).num_rows for f in files),
                sum(f.stat().st_size for f in files),
            ))
    return table(["bucket", "dump", "files", "rows", "bytes"], rows)


def dedup_summary(output: Path, dumps: list[str]) -> tuple[str, str | None]:
    """Near-duplicates dropped per dump, and the id of one dropped against an earlier dump."""
    rows, example = [], None
    for dump in dumps:
        decisions = pq.read_table(dedup_path(output, dump), columns=["id", "keep", "duplicate_of_dump"])
        dropped = decisions.filter(pc.invert(decisions.column("keep")))
        earlier = dropped.filter(pc.not_equal(dropped.column("duplicate_of_dump"), dump))
        rows.append((
            dump, decisions.num_rows, dropped.num_rows - earlier.num_rows, earlier.num_rows,
            decisions.num_rows - dropped.num_rows,
        ))
        example = example or (earlier.column("id")[0].as_py() if earlier.num_rows else None)
    header = ["dump", "documents", "dropped within dump", "dropped against earlier dumps", "kept"]
    return table(header, rows), example


def mixture_summary(output: Path, env: dict[str, str]) -> str:
    """The demo recipe's plan: its stages, then each stage's sources and Megatron-LM flags."""
    stages = planned_stages(read_plan(output, DEMO_RECIPE))
    explain = command_line(env, "-m", "fw_assets.mixtures", "explain", DEMO_RECIPE, "--sample", "0")
    parts = [f"\nmixture {DEMO_RECIPE}\nthe documents of its training sample 0:  {explain}", stage_table(stages)]
    for stage in stages:
        parts += [source_table(stage, member_figures(stage)),
                  f"Megatron-LM flags of stage {stage.name}:\n{megatron_args_text(stage)}"]
    return "\n\n".join(parts)


def reweighting_summary(source: Path, output: Path, dumps: list[str]) -> str:
    """What the demo recipe's reweighting did to each kind of top-bucket document: dropped (in no
    view), listed once or twice in the train split of its stage's views."""
    plan = read_plan(output, DEMO_RECIPE)
    train = split_matrix(plan["split"])[0]
    counts: Counter = Counter()
    everyone = []
    for member in plan["phases"][0]["stages"][0]["members"]:
        if member["source"] == REWEIGHTED_SOURCE:
            listed = read_document_index(Path(member["path"]))["id"].to_pylist()
            counts.update(listed[: split_documents(train, len(listed))[1]])
            listed_anywhere = set(listed)
            original = read_document_index(token_prefix(output, plan["tokenizer"], member["bucket"], member["dump"]))
            everyone += [(i, i in listed_anywhere) for i in original["id"].to_pylist()]
    kind_of = {}
    for dump in dumps:
        planted = pq.read_table(planted_probe_truth_path(source, dump))
        kind_of |= dict(zip(planted.column("id").to_pylist(), planted.column("kind").to_pylist()))
    rows = []
    for kind in ("gibberish", "contract", "typical"):
        mine = [(i, listed) for i, listed in everyone if kind_of.get(i, "typical") == kind]
        dropped = sum(1 for _, listed in mine if not listed)
        twice = sum(1 for i, _ in mine if counts[i] == 2)
        rows.append((kind, len(mine), dropped, dropped / max(len(mine), 1), twice, twice / max(len(mine), 1)))
    return "\n\n".join([
        f"\nreweighting of source {REWEIGHTED_SOURCE} by its probe losses (report: {report_path(output, DEMO_RECIPE)}, "
        f"histogram: {loss_picture_path(output, DEMO_RECIPE, REWEIGHTED_SOURCE)}):",
        table(["planted kind", "documents", "dropped", "dropped share", "listed twice", "twice share"], rows),
    ])


def curriculum_summary(output: Path) -> str:
    """The curriculum's stages (temperature annealed, context growing) and where its outputs are."""
    return "\n\n".join([
        f"\nmixture {CURRICULUM_RECIPE} (each stage's flags and sources: {report_path(output, CURRICULUM_RECIPE)}):",
        stage_table(planned_stages(read_plan(output, CURRICULUM_RECIPE))),
        f"shares over training: {shares_picture_path(output, CURRICULUM_RECIPE)}\n"
        f"packed samples:       {packed_root(output, CURRICULUM_RECIPE)}/<stage>/part-*.parquet",
    ])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fw_assets.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--dumps", nargs="+", default=list(DEFAULT_DUMPS), metavar="DUMP")
    parser.add_argument("--rows", type=int, default=20_000, help="rows per generated dump")
    args = parser.parse_args(argv)

    env = demo_environment()
    source, output = Path(env[settings.SOURCE_DIR_ENV]), Path(env[settings.OUTPUT_DIR_ENV])
    ensure_sample_dumps(source, args.dumps, args.rows)
    home = Path(env[DAGSTER_HOME])
    write_instance_yaml(home)
    log_dir = home / "demo-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    for dump in sorted(args.dumps):  # crawl order: each dump is decided against the earlier ones
        materialize(f"group:{SIGNING_GROUP},group:{KEPT_GROUP},probe_loss", dump, env, log_dir)
    materialize("mixture_plan*", DEMO_RECIPE, env, log_dir)
    materialize("mixture_plan*", CURRICULUM_RECIPE, env, log_dir)

    print(f"\nsource dumps:   {source_data_dir(source)}/")
    print(f"bucketed:       {bucket_dump_dir(output, '<bucket>', '<dump>')}/*.parquet")
    tokens = token_prefix(output, "<tokenizer>", "<bucket>", "<dump>")
    if tokenized_root(output).is_dir():
        print(f"tokenized:      {tokens}.bin|.idx|.docs.parquet")
    print(f"dedup:          {dedup_path(output, '<dump>')} (one decision per bucketed id)")
    print(f"probe losses:   {probe_loss_path(output, BUILTIN, '<bucket>', '<dump>')}")
    print(f"mixture:        {mixture_dir(output, DEMO_RECIPE)}/ (plan.json, report.md, cache/)")
    ui = command_line(env, "-m", "dagster", "dev", "-w", str(REPO / "workspace.yaml"))
    print(f"run history:    {home} (the demo's own instance); open the UI with:  cd {shlex.quote(str(REPO))} && {ui}\n")
    print(bucket_summary(output, args.dumps))
    drops, example = dedup_summary(output, args.dumps)
    print(f"\nnear-duplicates (tokenized holds the kept documents only):\n{drops}")
    if example:
        print(f"\nwhy one was dropped:  {command_line(env, '-m', 'fw_assets.dedup', 'explain', example)}")
    print(mixture_summary(output, env))
    print(reweighting_summary(source, output, args.dumps))
    print(curriculum_summary(output))


if __name__ == "__main__":
    main()
