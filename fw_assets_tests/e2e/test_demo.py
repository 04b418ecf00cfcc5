"""The README's first command: the demo runs every step of every sample dump (the built-in probe's
losses included), builds the demo mixture over them (its top source reweighted by those losses:
the planted gibberish dropped, the legal-register pages repeated), and says where it went."""

import os
import subprocess
import sys

import dagster as dg
import pytest

from fw_assets.sampling_policy import SEED_POLICY
from fw_assets_tests.support.runs import subprocess_env


@pytest.mark.e2e
def test_demo_runs_the_chain_on_generated_dumps_and_prints_a_summary(tmp_path, dagster_home):
    source, output = tmp_path / "fineweb-edu", tmp_path / "fineweb"
    dumps = ["CC-MAIN-2013-20", "CC-MAIN-2013-48"]
    finished = subprocess.run(
        [sys.executable, "-m", "fw_assets.demo", "--rows", "3000", "--dumps", *dumps],
        env=subprocess_env(source, output, dagster_home),
        capture_output=True, text=True, timeout=600,
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    for dump in dumps:
        assert f"materialized {dump}" in finished.stdout
        for bucket in SEED_POLICY.buckets:
            assert list((output / "en" / bucket.name / dump).glob("*.parquet"))
            assert f"| {bucket.name} | {dump} | 1 |" in finished.stdout
    assert f"{output}/en/<bucket>/<dump>/*.parquet" in finished.stdout
    later = next(line for line in finished.stdout.splitlines() if line.startswith(f"| {dumps[1]} | "))
    assert int(later.split("|")[4].replace(",", "")) > 0, "the later dump drops copies of the earlier one"
    assert "python -m fw_assets.dedup explain '<urn:uuid:" in finished.stdout
    assert "materialized demo" in finished.stdout and "mixture demo" in finished.stdout
    assert "| main | main | 1,000,000 | 256 |" in finished.stdout  # the plan's stage table
    assert f"--data-cache-path {output}/mixtures/demo/cache" in finished.stdout
    assert list((output / "mixtures" / "demo" / "cache").glob("*-BlendedDataset-train-dataset_index.npy"))
    assert f"probe losses:   {output}/probe/builtin/<bucket>/<dump>.parquet" in finished.stdout
    for dump in dumps:
        assert list((output / "probe" / "builtin" / "4.0").glob(f"{dump}.parquet"))
    assert (output / "mixtures" / "demo" / "losses-top.png").is_file()
    assert "## Reweighted sources" in (output / "mixtures" / "demo" / "report.md").read_text()
    kinds = reweighting_rows(finished.stdout)
    assert kinds["gibberish"]["dropped share"] > 0.5 > kinds["typical"]["dropped share"] == 0
    assert kinds["contract"]["twice share"] > 0.3 > 0.05 > kinds["typical"]["twice share"]
    assert "materialized curriculum" in finished.stdout and "mixture curriculum" in finished.stdout
    stage_rows = ["| explore | explore-1 | 65,536 | 64 |", "| refine | refine-2 | 65,536 | 128 |",
                  "| long | long | 65,536 | 256 |"]
    for row in stage_rows:
        assert row in finished.stdout  # the curriculum's stage table: context grows phase by phase
    assert (output / "mixtures" / "curriculum" / "shares.png").is_file()
    assert list((output / "mixtures" / "curriculum" / "packed" / "long").glob("part-*.parquet"))
    assert_printed_commands_work(finished.stdout, tmp_path)
    assert_the_demo_used_an_instance_of_its_own(finished.stdout, output, dagster_home)
    assert_every_published_file_verifies(output, dagster_home)


def assert_every_published_file_verifies(output, dagster_home) -> None:
    """The README's `verify` on the demo's output: every file the demo published matches its record."""
    verified = subprocess.run([sys.executable, "-m", "fw_assets.verify"], capture_output=True, text=True, timeout=120,
                              env=subprocess_env(output.parent / "fineweb-edu", output, dagster_home))
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    assert f"publication(s) under {output} match their generation records (size and xxh3_128)" in verified.stdout


def assert_the_demo_used_an_instance_of_its_own(stdout: str, output, dagster_home) -> None:
    """The shell's instance (DAGSTER_HOME) holds no demo run: the demo's history is in an instance
    beside its output folder, which the printed UI command opens."""
    with dg.DagsterInstance.from_config(str(dagster_home)) as shells:
        assert shells.get_runs() == []
    home = output.parent / f"{output.name}.dagster"
    with dg.DagsterInstance.from_config(str(home)) as demos:
        assert demos.get_runs()
    ui = next(line for line in stdout.splitlines() if line.startswith("run history:"))
    assert f"DAGSTER_HOME={home}" in ui and "dagster dev -w" in ui


def reweighting_rows(stdout: str) -> dict[str, dict[str, float]]:
    """The demo's table of what the reweighting did to each planted kind, by kind and column."""
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| planted kind |"))
    names = [c.strip() for c in lines[header].strip("|").split("|")]
    rows = {}
    for line in lines[header + 2: header + 5]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = {n: float(c.replace(",", "")) for n, c in zip(names[1:], cells[1:])}
    return rows


def assert_printed_commands_work(stdout: str, folder) -> None:
    """Each `python -m fw_assets…` command the demo prints, pasted into a fresh shell (none of the
    FW_ variables set) in the same folder, runs and finds what the demo published."""
    fresh = {name: value for name, value in os.environ.items() if not name.startswith("FW_")}
    commands = [line.split(":  ", 1)[1] for line in stdout.splitlines() if ":  " in line and " -m fw_assets." in line]
    shown = {" ".join(c.split(" -m ")[1].split()[:2]) for c in commands}
    assert {"fw_assets.dedup explain", "fw_assets.mixtures explain"} <= shown
    for command in commands:
        pasted = subprocess.run(
            ["bash", "-c", command], env=fresh, cwd=folder, capture_output=True, text=True, timeout=300
        )
        assert pasted.returncode == 0, f"{command}\n{pasted.stdout[-2000:]}{pasted.stderr[-2000:]}"
        assert "dropped" in pasted.stdout or '"documents"' in pasted.stdout or "kept" in pasted.stdout, pasted.stdout
