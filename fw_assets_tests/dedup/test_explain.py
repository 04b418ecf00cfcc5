"""Why a document was kept or dropped (fw_assets.dedup.explain), on the planted dumps' decisions."""

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from bench.dedup_quality import DUMPS
from fw_assets.dedup.explain import explain
from fw_assets_tests.support.planted_dumps import read


def test_explain_names_the_match_the_shared_bands_and_the_similarity(minhash, decisions):
    rows = read(decisions)[DUMPS[2]]
    dropped = next(r for r in rows if not r["keep"] and r["duplicate_of_dump"] != DUMPS[2])
    kept = next(r for r in rows if r["keep"])
    con = duckdb.connect(":memory:")
    (why,) = explain(con, dropped["id"], decisions, minhash.__getitem__)
    assert (why.dump, why.duplicate_of, why.duplicate_of_dump) == (
        DUMPS[2], dropped["duplicate_of"], dropped["duplicate_of_dump"]
    )
    assert why.shared_bands and why.similarity == dropped["similarity"]
    assert f"near-duplicate of {dropped['duplicate_of']} ({dropped['duplicate_of_dump']})" in why.describe()
    assert "share band(s)" in why.describe()
    assert [e.keep for e in explain(con, kept["id"], decisions, minhash.__getitem__)] == [True]
    assert explain(con, "<urn:uuid:nothing>", decisions, minhash.__getitem__) == []


def rewritten(decisions: Path, target: Path, change) -> Path:
    """A copy of a decision file with `change(rows)` applied to its rows."""
    table = pq.read_table(decisions)
    pq.write_table(pa.Table.from_pylist(change(table.to_pylist()), table.schema), target)
    return target


def dropped_through_cluster(rows: list[dict], doc_id: str, match: str, match_dump: str) -> list[dict]:
    """`doc_id` dropped as a duplicate of `match`, as a cluster member without a band of its own
    in common with it would be (the generated dumps hold no such chain)."""
    pointer = {"keep": False, "duplicate_of": match, "duplicate_of_dump": match_dump, "similarity": 0.5}
    return [{**r, **pointer} if r["id"] == doc_id else r for r in rows]


def test_explain_words_drops_through_a_cluster_within_the_dump_and_against_an_earlier_one(
    minhash, decisions, tmp_path
):
    first, second = (read(decisions)[d] for d in DUMPS[:2])
    keeper, member, earlier = [r["id"] for r in first if r["keep"]][:3]
    late_member = next(r["id"] for r in second if r["keep"])
    files = dict(decisions)
    files[DUMPS[0]] = rewritten(
        decisions[DUMPS[0]], tmp_path / "first.parquet",
        lambda rows: dropped_through_cluster(rows, member, keeper, DUMPS[0]),
    )
    files[DUMPS[1]] = rewritten(
        decisions[DUMPS[1]], tmp_path / "second.parquet",
        lambda rows: dropped_through_cluster(rows, late_member, earlier, DUMPS[0]),
    )
    con = duckdb.connect(":memory:")
    (within,) = explain(con, member, files, minhash.__getitem__)
    (against,) = explain(con, late_member, files, minhash.__getitem__)
    assert within.shared_bands == against.shared_bands == ()
    assert f"near-duplicate of {keeper} ({DUMPS[0]})" in within.describe()
    assert "other documents of this dump link them into one near-duplicate cluster" in within.describe()
    assert "earlier" not in within.describe()
    assert f"near-duplicate of {earlier} ({DUMPS[0]})" in against.describe()
    assert "another document of its cluster in this dump matched that earlier document" in against.describe()


def test_explain_lists_every_dump_holding_the_id_in_crawl_order(minhash, decisions, tmp_path):
    """Ids are unique per dump, not across dumps: a page fetched twice may keep its id."""
    first = read(decisions)[DUMPS[0]]
    kept = next(r for r in first if r["keep"])
    files = {  # given latest first: the answer is still in crawl order
        DUMPS[2]: decisions[DUMPS[2]],
        DUMPS[1]: rewritten(
            decisions[DUMPS[1]], tmp_path / "second.parquet",
            lambda rows: [*rows, {**kept, "keep": False, "duplicate_of": kept["id"],
                                  "duplicate_of_dump": DUMPS[0], "similarity": 1.0}],
        ),
        DUMPS[0]: decisions[DUMPS[0]],
    }
    con = duckdb.connect(":memory:")
    found = explain(con, kept["id"], files, minhash.__getitem__)
    assert [(e.dump, e.keep, e.duplicate_of_dump) for e in found] == [
        (DUMPS[0], True, None), (DUMPS[1], False, DUMPS[0])
    ]
