"""The files of `minhash` (fw_assets.dedup.signature_files): variants of one text signed alike,
short texts unsigned, the policy's fingerprint carried and checked."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fw_assets.dedup.decide import decide_dump
from fw_assets.dedup.minhash_policy import MINHASH_POLICY, MinhashPolicy
from fw_assets.dedup.signature_files import (
    FINGERPRINT_KEY,
    MinhashFileError,
    check_minhash_file,
    content_version,
    read_signatures,
    write_minhash_file,
)
from fw_assets_tests.support.dedup_texts import BASE, VARIANTS

DUMP = "CC-MAIN-2013-20"


def write_bucketed(path, texts: list[str]) -> None:
    ids = [f"<urn:uuid:00000000-0000-4000-8000-{i:012d}>" for i in range(len(texts))]
    pq.write_table(pa.table({"id": ids, "text": texts, "score": [3.0] * len(texts)}), path)


def test_variants_of_one_text_get_one_signature_and_short_texts_none(tmp_path):
    other = "a different text about oceans and rivers"
    texts = [BASE, *VARIANTS, "four words only here", "", other]
    write_bucketed(tmp_path / "in.parquet", texts)
    sources = [("3.0", tmp_path / "in.parquet")]
    summary = write_minhash_file(
        duckdb.connect(), sources, tmp_path / "m.parquet", DUMP, MINHASH_POLICY
    )
    table = pq.read_table(tmp_path / "m.parquet")
    assert table["text_start"].to_pylist() == [t[:80] for t in texts]  # characters, not bytes
    assert (summary.documents, summary.without_shingles) == (7, 2)
    keys = table["band_keys"].to_pylist()
    signatures = read_signatures(tmp_path / "m.parquet")["signature"].to_pylist()
    assert all(k == keys[0] and s == signatures[0] for k, s in zip(keys[1:4], signatures[1:4]))
    assert keys[4] is keys[5] is signatures[4] is signatures[5] is None
    assert len(keys[0]) == 16 and len(signatures[0]) == 112 * 2
    assert set(keys[6]).isdisjoint(keys[0])
    con = duckdb.connect(":memory:")
    decide_dump(con, DUMP, tmp_path / "m.parquet", [], tmp_path / "d.parquet", MINHASH_POLICY)
    decisions = pq.read_table(tmp_path / "d.parquet").to_pylist()
    assert [d["keep"] for d in decisions] == [True, False, False, False, True, True, True]
    assert {d["duplicate_of"] for d in decisions[1:4]} == {decisions[0]["id"]}  # equal scores: least id
    assert all(d["similarity"] == 1.0 for d in decisions[1:4])


def test_the_file_carries_the_policy_fingerprint_and_other_policies_are_refused(tmp_path):
    write_bucketed(tmp_path / "in.parquet", [BASE])
    sources = [("3.0", tmp_path / "in.parquet")]
    write_minhash_file(duckdb.connect(), sources, tmp_path / "m.parquet", DUMP, MINHASH_POLICY)
    check_minhash_file(tmp_path / "m.parquet", MINHASH_POLICY, DUMP)
    # Decision settings do not change signatures: files stay usable.
    decisions_only = MinhashPolicy(verify_threshold=0.8, scope="within_dump")
    check_minhash_file(tmp_path / "m.parquet", decisions_only, DUMP)
    for other in (MinhashPolicy(bands=14, rows=8), MinhashPolicy(ngram=4), MinhashPolicy(seed=5)):
        with pytest.raises(MinhashFileError, match="written with MinHash policy"):
            check_minhash_file(tmp_path / "m.parquet", other, DUMP)
    # A file of an older version of the minhash file (without text starts) is named the same way.
    old = pq.read_table(tmp_path / "m.parquet").drop_columns(["text_start"])
    old_metadata = {**old.schema.metadata, FINGERPRINT_KEY: b"0123456789ab"}
    pq.write_table(old.replace_schema_metadata(old_metadata), tmp_path / "old.parquet")
    with pytest.raises(MinhashFileError, match=r"old\.parquet: written with MinHash policy 0123456789ab.*re-mat"):
        check_minhash_file(tmp_path / "old.parquet", MINHASH_POLICY, DUMP)
    expected = "holds the minhash of 'CC-MAIN-2013-20', expected 'CC-MAIN-2013-48'"
    with pytest.raises(MinhashFileError, match=expected):
        check_minhash_file(tmp_path / "m.parquet", MINHASH_POLICY, "CC-MAIN-2013-48")
    assert MinhashPolicy(verify_threshold=0.8).fingerprint() != MINHASH_POLICY.fingerprint()
    assert MinhashPolicy(scope="off").fingerprint() != MINHASH_POLICY.fingerprint()


def test_the_content_version_names_the_documents_whatever_their_order(tmp_path):
    """bucketed writes a dump's rows in no fixed order: the same documents signed in another order
    (other file bytes, other row numbers) get the same content version; another text does not."""
    texts = [BASE, *VARIANTS, "four words only here", "a different text about oceans and rivers"]
    ids = [f"<urn:uuid:00000000-0000-4000-8000-{i:012d}>" for i in range(len(texts))]
    rows = pa.table({"id": ids, "text": texts, "score": [3.0] * len(texts)})
    versions = []
    for name, order in (("a", range(len(texts))), ("b", reversed(range(len(texts))))):
        pq.write_table(rows.take(list(order)), tmp_path / f"{name}.parquet")
        write_minhash_file(duckdb.connect(), [("3.0", tmp_path / f"{name}.parquet")], tmp_path / f"m{name}.parquet",
                           DUMP, MINHASH_POLICY)
        versions.append(content_version(tmp_path / f"m{name}.parquet"))
    assert read_signatures(tmp_path / "ma.parquet") != read_signatures(tmp_path / "mb.parquet")
    assert versions[0] == versions[1]
    changed = rows.set_column(1, "text", pa.array([*texts[:-1], "a different text about lakes and rivers"]))
    pq.write_table(changed, tmp_path / "c.parquet")
    write_minhash_file(
        duckdb.connect(), [("3.0", tmp_path / "c.parquet")], tmp_path / "mc.parquet", DUMP, MINHASH_POLICY
    )
    assert content_version(tmp_path / "mc.parquet") != versions[0]
