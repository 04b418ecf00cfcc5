"""The decisions' contract (fw_assets.dedup.contract) fails when it should: every rule of
`deduplicated.reconciliation` on a tampered decision file (from the session's `tokenized_sample`),
and a decision missing through the asset itself."""

from collections.abc import Callable

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fw_assets.dedup.contract import EXAMPLE_PAIRS, check_decisions, example_pairs
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash_policy import MINHASH_POLICY
from fw_assets.paths import bucketed_files, dedup_path, minhash_path, publication_name
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets_tests.support.contract_cases import line_of, refusal
from fw_assets_tests.support.dedup_runs import example_rows
from fw_assets_tests.support.runs import SAMPLE_DUMPS, materialize_dump
from fw_assets_tests.support.trees import published_tree, rerecord_file, writable_copy

EARLY, LATE = SAMPLE_DUMPS
UNKNOWN = "<urn:uuid:00000000-not-a-document>"

Rows = list[dict]


# --- deduplicated.reconciliation: one tamper per rule, each returning the id it breaks ---------


def without_a_decision(rows: Rows) -> tuple[Rows, str]:
    gone = next(r for r in rows if r["keep"])
    return [r for r in rows if r is not gone], gone["id"]


def with_a_stranger(rows: Rows) -> tuple[Rows, str]:
    stranger = {**next(r for r in rows if r["keep"]), "id": UNKNOWN}
    return [*rows, stranger], UNKNOWN


def decided_twice(rows: Rows) -> tuple[Rows, str]:
    twice = next(r for r in rows if r["keep"])
    return [*rows, dict(twice)], twice["id"]


def repointed(rows: Rows, is_drop: Callable[[dict], bool], **pointer) -> tuple[Rows, str]:
    drop = next(r for r in rows if not r["keep"] and is_drop(r))
    return [{**r, **pointer} if r is drop else r for r in rows], drop["id"]


def against_earlier(r: dict) -> bool:
    return r["duplicate_of_dump"] == EARLY


def pointing_at_a_drop(rows: Rows) -> tuple[Rows, str]:
    """A drop pointing at another drop of its own dump instead of the document its cluster keeps."""
    first, second = [r for r in rows if not r["keep"]][:2]
    return repointed(rows, lambda r: r is first, duplicate_of=second["id"], duplicate_of_dump=LATE)


DECISION_TAMPERS = {
    "decision_missing": without_a_decision,
    "not_bucketed": with_a_stranger,
    "decided_twice": decided_twice,
    "pointer_unknown": lambda rows: repointed(rows, against_earlier, duplicate_of=UNKNOWN),
    # a dump not decided yet has no minhash file the pointer could be checked in either
    "pointer_not_earlier": lambda rows: repointed(rows, against_earlier, duplicate_of_dump="CC-MAIN-2099-01"),
    "pointer_dropped": pointing_at_a_drop,
}
ALSO_BROKEN = {"pointer_not_earlier": {"pointer_unknown"}}


@pytest.mark.parametrize("rule", DECISION_TAMPERS)
def test_each_rule_of_the_decisions_reconciliation_fails_a_tampered_file(
    tokenized_sample, con, tmp_path, rule
):
    output = tokenized_sample.output
    table = pq.read_table(dedup_path(output, LATE))
    rows = table.to_pylist()
    assert sum(against_earlier(r) for r in rows) > 1, "drops against the earlier dump"
    tampered_rows, broken = DECISION_TAMPERS[rule](rows)
    tampered = tmp_path / f"{LATE}.parquet"
    pq.write_table(pa.Table.from_pylist(tampered_rows, table.schema), tampered)
    bucket_files = [f for files in bucketed_files(output, LATE, SEED_POLICY).values() for f in files]
    minhash_files = {d: minhash_path(output, d) for d in (EARLY, LATE)}

    outcomes = check_decisions(con, LATE, tampered, bucket_files, minhash_files, MINHASH_POLICY)
    reconciliation = next(o for o in outcomes if o.check.name == "reconciliation")
    assert {v.rule for v in reconciliation.violations} == {rule} | ALSO_BROKEN.get(rule, set())
    message = refusal(LATE, "deduplicated", outcomes)
    assert message.startswith(f"Dump {LATE} failed the deduplicated contract; nothing was published")
    line = line_of(message, rule)
    assert line.startswith("- reconciliation: column id: 1 row: ") and broken in line


def test_a_decision_missing_fails_the_asset_and_keeps_the_published_decisions(
    sample_source, tokenized_sample, tmp_path
):
    """Bucketed gained a document its minhash file never signed (the bucket file edited, its
    record made to agree): the decisions miss it, the step fails, nothing is published."""
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    bucket_file = bucketed_files(output, LATE, SEED_POLICY)["3.0"][0]
    table = pq.read_table(bucket_file)
    added = table.slice(0, 1).set_column(table.schema.get_field_index("id"), "id", pa.array([UNKNOWN]))
    pq.write_table(pa.concat_tables([table, added]), bucket_file)
    rerecord_file(output, publication_name("bucketed", LATE), bucket_file)
    before = published_tree(output)

    result = materialize_dump(sample_source, output, LATE, assets=[deduplicated], raise_on_error=False)
    assert not result.success
    (check,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "reconciliation"]
    assert not check.passed and check.partition == LATE
    assert "decision_missing" in check.metadata["violations"].value
    message = result.get_step_failure_events()[0].step_failure_data.error.message
    assert f"Dump {LATE} failed the deduplicated contract" in message
    assert "1 row" in line_of(message, "decision_missing") and UNKNOWN in message
    assert published_tree(output) == before, "the decisions and their record are unchanged"


def test_example_pairs_show_both_kinds_of_drop_half_and_half_labelled(tmp_path):
    """The UI's example pairs: drops within the dump and against an earlier dump, half each when both
    have enough, ordered by id, each labelled with its kind."""
    dump, earlier = "CC-MAIN-2014-10", "CC-MAIN-2013-20"
    rows = [
        {"id": f"w{i:02}", "bucket": "3.0", "keep": False, "duplicate_of": f"k{i:02}", "duplicate_of_dump": dump,
         "similarity": 0.9}
        for i in range(12)
    ] + [
        {"id": f"e{i:02}", "bucket": "3.0", "keep": False, "duplicate_of": f"x{i:02}", "duplicate_of_dump": earlier,
         "similarity": 0.8}
        for i in range(12)
    ]
    decisions = tmp_path / "decisions.parquet"
    pq.write_table(pa.Table.from_pylist(rows), decisions)
    shown = example_rows(example_pairs(duckdb.connect(), dump, decisions, {}))
    assert len(shown) == EXAMPLE_PAIRS
    assert [r[0].strip("`") for r in shown] == [f"e{i:02}" for i in range(5)] + [f"w{i:02}" for i in range(5)]
    assert {(r[3], r[7]) for r in shown} == {(dump, "within the dump"), (earlier, "an earlier dump")}
