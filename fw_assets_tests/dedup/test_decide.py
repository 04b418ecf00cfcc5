"""Near-duplicate decisions (fw_assets.dedup.decide) on generated dumps with planted copies."""

from __future__ import annotations

import re
import shutil
import tracemalloc
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bench.dedup_quality import DUMPS, PARAGRAPH_SHARE, caught_share, datatrove_kept_ids, planted_pairs
from fw_assets.dedup.decide import decide_dump
from fw_assets.dedup.minhash_policy import MINHASH_POLICY, MinhashPolicy, Scope
from fw_assets.dedup.signature_files import MinhashFileError, signed_schema, write_minhash_file, write_signed
from fw_assets.paths import minhash_files as published_together
from fw_assets.paths import signatures_path, sorted_keys_path
from fw_assets.synthetic import write_sample_dumps
from fw_assets_tests.support.damage import damage_arrow_values, damage_first_page
from fw_assets_tests.support.planted_dumps import decide, minhash_files, read

# Planted copies have word 5-gram Jaccard 0.8-0.9 with their template: 16 x 7 bands make such a
# pair a candidate with probability >= 0.977. Against datatrove itself: the e2e test below.
CAUGHT_AT_LEAST = 0.95
COMPARED_ROWS = 700  # per dump, side by side with datatrove


def word_5grams(text: str) -> set[tuple[str, ...]]:
    words = re.sub(r"[^\w\s]|_", " ", re.sub(r"\d+", "0", text.lower())).split()
    return {tuple(words[i : i + 5]) for i in range(len(words) - 4)}


def jaccard(a: str, b: str) -> float:
    x, y = word_5grams(a), word_5grams(b)
    return len(x & y) / len(x | y)


def test_one_decision_per_document_and_pointers_that_exist(root, decisions):
    rows = read(decisions)
    ids = {dump: {r["id"] for r in dump_rows} for dump, dump_rows in rows.items()}
    for dump, dump_rows in rows.items():
        source_ids = pq.read_table(root / "data" / dump, columns=["id"])["id"].to_pylist()
        assert [r["id"] for r in dump_rows] == sorted(source_ids)
        kept = {r["id"] for r in dump_rows if r["keep"]}
        for r in dump_rows:
            if r["keep"]:
                assert r["duplicate_of"] is r["duplicate_of_dump"] is r["similarity"] is None
            elif r["duplicate_of_dump"] == dump:
                assert r["duplicate_of"] in kept  # within the dump it points at the kept one
            else:
                assert r["duplicate_of_dump"] < dump and r["duplicate_of"] in ids[r["duplicate_of_dump"]]


def kept_ids(decisions: dict[str, Path]) -> set[str]:
    return {r["id"] for dump_rows in read(decisions).values() for r in dump_rows if r["keep"]}


def test_planted_pairs_end_with_at_most_one_kept(root, decisions):
    pairs = planted_pairs(root, DUMPS)
    assert len(pairs) > 300  # across dumps and twins within them
    assert caught_share(pairs, kept_ids(decisions)) >= CAUGHT_AT_LEAST


@pytest.mark.e2e
@pytest.mark.needs_extra("bench")
def test_planted_pairs_are_caught_as_often_as_by_datatrove_on_the_same_rows(tmp_path):
    """datatrove 0.10's own four MinHash stages (defaults: 14 x 8, no verification) over the same
    three dumps' rows: fewer of them than the other tests share, as its spaCy word splitting takes
    about 20 ms a document here."""
    root = tmp_path / "dumps"
    write_sample_dumps(root, DUMPS, rows_per_dump=COMPARED_ROWS, seed=0, paragraph_share=PARAGRAPH_SHARE)
    datatrove_kept, _ = datatrove_kept_ids(root, tmp_path / "datatrove")
    ours = kept_ids(decide(minhash_files(root, tmp_path / "minhash"), tmp_path / "dedup"))
    pairs = planted_pairs(root, DUMPS)
    assert len(pairs) > 200
    assert caught_share(pairs, ours) >= caught_share(pairs, datatrove_kept)


def true_jaccards(decisions: dict[str, Path], texts: dict[str, str]) -> list[tuple[dict, float]]:
    """Each drop with the true word 5-gram Jaccard of its text and its duplicate_of's."""
    drops = [{**r, "dump": dump} for dump, rows in read(decisions).items() for r in rows if not r["keep"]]
    return [(r, jaccard(texts[r["id"]], texts[r["duplicate_of"]])) for r in drops]


def test_drops_are_true_near_duplicates_within_and_across_dumps(minhash, decisions, texts, tmp_path):
    drops = true_jaccards(decisions, texts)
    assert {r["duplicate_of_dump"] == r["dump"] for r, _ in drops} == {True, False}  # within and across
    assert sum(j >= 0.5 for _, j in drops) >= 0.98 * len(drops)
    assert sum(abs(r["similarity"] - j) for r, j in drops) / len(drops) < 0.05  # the estimate tracks it
    # The same LSH without verification falls into the generated trap (short pages sharing a paragraph).
    plain = true_jaccards(decide(minhash, tmp_path, policy=MinhashPolicy(verify_threshold=0.01)), texts)
    assert sum(j >= 0.5 for _, j in plain) < 0.95 * len(plain)


def test_the_earliest_dump_wins_and_clusters_keep_the_best_score(root, decisions):
    rows = read(decisions)
    first = rows[DUMPS[0]]
    assert all(r["duplicate_of_dump"] in (None, DUMPS[0]) for r in first)  # nothing earlier
    source = pq.read_table(root / "data" / DUMPS[0], columns=["id", "score"])
    scores = dict(zip(source["id"].to_pylist(), source["score"].to_pylist()))
    within = [r for r in first if not r["keep"]]
    assert within
    for r in within:
        assert (-scores[r["duplicate_of"]], r["duplicate_of"]) < (-scores[r["id"]], r["id"])


def test_same_bytes_whatever_order_the_dumps_are_processed_in(root, minhash, decisions, tmp_path):
    reverse = decide(dict(minhash), tmp_path, order=DUMPS[::-1])  # all minhash files exist already
    for dump in DUMPS:
        assert reverse[dump].read_bytes() == decisions[dump].read_bytes()
    late = {dump: tmp_path / "late" / f"{dump}.parquet" for dump in DUMPS}
    (tmp_path / "late").mkdir()
    for dump in DUMPS[::-1]:  # minhash materialized newest first: each decided before its elders exist
        for source, target in zip(published_together(minhash[dump]), published_together(late[dump])):
            shutil.copy(source, target)
        decide(late, tmp_path / "first-pass", order=[dump])
    first_pass = tmp_path / "first-pass" / f"{DUMPS[-1]}.parquet"
    assert first_pass.read_bytes() != decisions[DUMPS[-1]].read_bytes()  # decided alone, it differed
    redone = decide(late, tmp_path / "redone", order=DUMPS[1:])  # the stale later dumps, re-run
    for dump in DUMPS[1:]:
        assert redone[dump].read_bytes() == decisions[dump].read_bytes()


def test_same_bytes_at_one_and_two_threads_and_any_batch_size(root, minhash, decisions, tmp_path):
    two = minhash_files(root, tmp_path / "minhash", threads=2, batch=333)
    for dump in DUMPS:
        assert two[dump].read_bytes() == minhash[dump].read_bytes()
    redone = decide(two, tmp_path / "dedup", threads=2)
    for dump in DUMPS:
        assert redone[dump].read_bytes() == decisions[dump].read_bytes()


@pytest.mark.parametrize(
    ("damage", "dump"),
    [
        ("truncated", DUMPS[0]),
        ("keys_batch", DUMPS[0]),
        ("signatures_batch", DUMPS[0]),
        ("signatures_batch", DUMPS[1]),  # the dump's own file
        ("score_pages", DUMPS[1]),  # DuckDB reads it without checksums
        ("other_policy", DUMPS[0]),
    ],
)
def test_a_bad_minhash_file_is_named_and_nothing_is_written(root, minhash, tmp_path, damage, dump):
    """Damaged pages or record batches (footer, sizes and headers intact) are found by their
    checksums and digests."""
    files = dict(minhash)
    bad = tmp_path / f"{dump}.parquet"
    for source, target in zip(published_together(minhash[dump]), published_together(bad)):
        shutil.copy(source, target)
    if damage == "truncated":
        bad.write_bytes(minhash[dump].read_bytes()[:-100])
    elif damage == "keys_batch":
        damage_arrow_values(sorted_keys_path(bad), "key")
    elif damage == "signatures_batch":
        damage_arrow_values(signatures_path(bad), "signature")
    elif damage.endswith("_pages"):
        damage_first_page(bad, damage.removesuffix("_pages"))
    else:
        bad = minhash_files(root, tmp_path, policy=MinhashPolicy(seed=2))[dump]
    files[dump] = bad
    with pytest.raises(MinhashFileError, match=re.escape(str(bad))):
        decide(files, tmp_path / "dedup", order=[DUMPS[1]])
    assert not (tmp_path / "dedup" / f"{DUMPS[1]}.parquet").exists()


def peak_numpy_memory(minhash: dict[str, Path], dump: str, earlier: list[str], out: Path) -> int:
    """Peak bytes traced (numpy's arrays and Python's objects, not Arrow's) deciding `dump`."""
    with duckdb.connect(":memory:") as con:
        tracemalloc.start()
        try:
            earlier_files = [(d, minhash[d]) for d in earlier]
            decide_dump(con, dump, minhash[dump], earlier_files, out, MINHASH_POLICY)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_memory_stays_flat_when_pages_recur_in_every_earlier_dump(root, minhash, tmp_path):
    """Every page of a dump recurs in each of five earlier dumps (its own rows signed again under
    earlier names): each document points at its copy in the first of them (the earliest crawl wins
    ties), and the matches kept while reading them do not grow with their number."""
    dump = DUMPS[2]
    sources = [(b, minhash[dump].parent / f"{dump}-{b}-bucketed.parquet") for b in ("2.8", "3.0")]
    copies = {f"CC-MAIN-2013-0{i}": tmp_path / f"copy{i}.parquet" for i in range(1, 6)}
    with duckdb.connect(":memory:") as con:
        for copy, path in copies.items():
            write_minhash_file(con, sources, path, copy, MINHASH_POLICY)
    files = {**copies, dump: minhash[dump]}
    peak_numpy_memory(files, dump, list(copies)[:1], tmp_path / "warm-up.parquet")  # numba, caches
    # three against five, both past the merges' transient (the running best, a later file's best
    # and their merge): matches collected from every file would grow by two thirds
    three = peak_numpy_memory(files, dump, list(copies)[:3], tmp_path / "three.parquet")
    five = peak_numpy_memory(files, dump, list(copies), tmp_path / "five.parquet")
    assert five < 1.2 * three
    rows = pq.read_table(tmp_path / "five.parquet").to_pylist()
    dropped = [r for r in rows if not r["keep"]]
    assert len(dropped) > 0.95 * len(rows)  # all but pages too short for a single shingle
    for r in dropped:
        assert (r["duplicate_of_dump"], r["similarity"]) == ("CC-MAIN-2013-01", 1.0)
        assert r["duplicate_of"] <= r["id"]  # itself, or a smaller id with the same signature


def handmade_minhash_file(path: Path, dump: str, documents: dict[str, tuple[int, int]]) -> Path:
    """A minhash file (and the files beside it) of documents given as id -> (their key in band 0, a seed
    drawing their signature) instead of texts: their keys in the other bands are numbered by their
    position in id order (so the n-th documents of two files share them), and
    documents with equal seeds have equal signatures (estimated Jaccard 1), others about 0."""
    policy, schema = MINHASH_POLICY, signed_schema(MINHASH_POLICY, dump)
    ids = sorted(documents)
    keys = [
        [documents[doc][0], *range(100 * (i + 1), 100 * (i + 1) + policy.bands - 1)]
        for i, doc in enumerate(ids)
    ]
    signatures = [
        np.random.default_rng(documents[doc][1]).integers(0, 2**16, policy.permutations, "<u2").tobytes()
        for doc in ids
    ]
    columns = [ids, ["3.0"] * len(ids), [3.0] * len(ids), keys, signatures, ids]
    batch = pa.record_batch([pa.array(c, f.type) for c, f in zip(columns, schema)], schema=schema)
    with duckdb.connect(":memory:") as con:
        write_signed(con, path, policy, dump, [batch])
    return path


def test_a_signatures_file_from_another_signing_of_the_dump_is_refused(tmp_path):
    """The three files of a minhash publication go together: a signatures file of other rows of
    the same dump and policy (copied in by hand) is named, and nothing is decided."""
    dump = DUMPS[0]
    path = handmade_minhash_file(tmp_path / f"{dump}.parquet", dump, {"a": (7, 1), "b": (8, 2)})
    (tmp_path / "other").mkdir()
    other = handmade_minhash_file(tmp_path / "other" / f"{dump}.parquet", dump, {"a": (7, 1), "c": (8, 2)})
    shutil.copy(signatures_path(other), signatures_path(path))
    with pytest.raises(MinhashFileError, match=re.escape(str(path)) + ".*holds other ids or rows"):
        decide({dump: path}, tmp_path / "dedup", order=[dump])
    assert not (tmp_path / "dedup" / f"{dump}.parquet").exists()


def test_members_unlike_their_band_key_s_least_id_but_alike_are_clustered(tmp_path):
    """Documents sharing a band key are clusters after verification, also when unlike the key's
    least id: `b` and `c` are alike, `a` unlike both; `f` and `g` are alike, met after `d` and `e`,
    each unlike all others, failed as anchors. One of each alike pair is dropped."""
    dump, earlier = DUMPS[1], DUMPS[0]
    documents = {
        "a": (7, 1), "b": (7, 2), "c": (7, 2), "d": (8, 3), "e": (8, 4), "f": (8, 5), "g": (8, 5),
    }
    files = {
        dump: handmade_minhash_file(tmp_path / f"{dump}.parquet", dump, documents),
        # An earlier dump whose one page shares keys with `a` but is unlike it: no match there.
        earlier: handmade_minhash_file(tmp_path / f"{earlier}.parquet", earlier, {"z": (9, 9)}),
    }
    rows = pq.read_table(decide(files, tmp_path / "dedup", order=[dump])[dump]).to_pylist()
    dropped = {
        r["id"]: (r["duplicate_of"], r["duplicate_of_dump"], r["similarity"]) for r in rows if not r["keep"]
    }
    assert dropped == {"c": ("b", dump, 1.0), "g": ("f", dump, 1.0)}
    two_anchors = decide(files, tmp_path / "two", order=[dump], policy=MinhashPolicy(anchor_rounds=2))
    assert pq.read_table(two_anchors[dump], filters=~pc.field("keep")).column("id").to_pylist() == ["c"]


def test_equally_similar_earlier_matches_go_to_the_earliest_dump_then_the_least_id(tmp_path):
    """`x`'s page is in the first dump three times and in the second once, all equally alike:
    it points at the first dump's least id. `w`'s page is in the second dump only."""
    first, second, dump = DUMPS
    pages = {
        first: {"m": (7, 1), "k": (7, 1), "z": (7, 1)},
        second: {"a": (7, 1), "b": (9, 2)},
        dump: {"x": (7, 1), "w": (9, 2), "v": (11, 3)},
    }
    files = {d: handmade_minhash_file(tmp_path / f"{d}.parquet", d, documents) for d, documents in pages.items()}
    rows = pq.read_table(decide(files, tmp_path / "dedup", order=[dump])[dump]).to_pylist()
    dropped = {
        r["id"]: (r["duplicate_of"], r["duplicate_of_dump"], r["similarity"]) for r in rows if not r["keep"]
    }
    assert dropped == {"x": ("k", first, 1.0), "w": ("b", second, 1.0)}


def test_scopes(minhash, decisions, tmp_path):
    within = read(decide(minhash, tmp_path / "within", policy=MinhashPolicy(scope=Scope.WITHIN_DUMP)))
    for dump, rows in within.items():
        assert all(r["duplicate_of_dump"] in (None, dump) for r in rows)
    assert sum(not r["keep"] for rows in within.values() for r in rows) < sum(
        not r["keep"] for rows in read(decisions).values() for r in rows
    )
    off = read(decide(minhash, tmp_path / "off", policy=MinhashPolicy(scope=Scope.OFF)))
    assert all(r["keep"] for rows in off.values() for r in rows)
