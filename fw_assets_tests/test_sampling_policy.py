"""The SQL sampler picks exactly the rows the seed's Python formula picks."""

import uuid

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fw_assets.bucketing.sample_and_bucket import selection_counts, write_selection
from fw_assets.lib.progress import ProgressReporter
from fw_assets.sampling_policy import SEED_POLICY, SamplingPolicy, ScoreBucket

BOUNDARY_SCORES = [2.8, 2.7999999, 3.0, 3.5, 4.0, 5.2, 0.0, 2.9999999, 3.4999999, 3.9999999]


def _ids_and_scores(n: int, seed: int) -> tuple[list[str], list[float]]:
    rng = np.random.default_rng(seed)
    ids = [f"<urn:uuid:{uuid.UUID(bytes=rng.bytes(16), version=4)}>" for _ in range(n)]
    continuous = rng.uniform(2.5, 5.3, size=n)
    boundary = rng.choice(BOUNDARY_SCORES, size=n)
    scores = np.where(rng.random(n) < 0.3, boundary, continuous)
    return ids, scores.tolist()


def _sql_kept(tmp_path, ids, scores, policy: SamplingPolicy) -> set[str]:
    source = tmp_path / "source.parquet"
    pq.write_table(pa.table({"id": ids, "score": pa.array(scores, pa.float64())}), source)
    selection = tmp_path / "selection.parquet"
    with duckdb.connect() as con:
        write_selection(con, [str(source)], selection, policy, ProgressReporter(print, "test", len(ids)))
        kept = con.execute("SELECT id FROM read_parquet(?) WHERE keep", [str(selection)]).fetchall()
    return {row[0] for row in kept}


def test_sql_sampler_equals_the_seed_formula_on_120k_ids(tmp_path):
    ids, scores = _ids_and_scores(120_000, seed=1)
    expected = {i for i, s in zip(ids, scores) if SEED_POLICY.keeps(i, s)}
    assert _sql_kept(tmp_path, ids, scores, SEED_POLICY) == expected
    # the check is only meaningful if every bucket was both kept from and dropped from
    for bucket in SEED_POLICY.buckets:
        in_bucket = [i for i, s in zip(ids, scores) if bucket.contains(s)]
        kept = sum(i in expected for i in in_bucket)
        assert 0 < kept <= len(in_bucket)
        assert (kept < len(in_bucket)) == (bucket.rate < 1)


def test_boundary_scores_fall_in_the_left_closed_bucket(tmp_path):
    keep_all = SamplingPolicy(seed=42, buckets=tuple(ScoreBucket(b.low, b.high, 1.0) for b in SEED_POLICY.buckets))
    ids, _ = _ids_and_scores(len(BOUNDARY_SCORES), seed=2)
    selection = tmp_path / "selection.parquet"
    source = tmp_path / "source.parquet"
    pq.write_table(pa.table({"id": ids, "score": BOUNDARY_SCORES}), source)
    with duckdb.connect() as con:
        write_selection(con, [str(source)], selection, keep_all, ProgressReporter(print, "t", 1))
        buckets = dict(con.execute("SELECT score, bucket FROM read_parquet(?)", [str(selection)]).fetchall())
    assert buckets == {
        2.8: "2.8", 2.7999999: None, 3.0: "3.0", 3.5: "3.5", 4.0: "4.0", 5.2: "4.0", 0.0: None,
        2.9999999: "2.8", 3.4999999: "3.0", 3.9999999: "3.5",
    }


@pytest.mark.parametrize("score", [None, float("nan"), float("inf"), float("-inf"), -1.0])
def test_unusable_scores_are_never_kept_as_in_python(tmp_path, score):
    ids = [f"<urn:uuid:{uuid.uuid4()}>" for _ in range(50)]
    assert _sql_kept(tmp_path, ids, [score] * 50, SEED_POLICY) == set()
    assert not any(SEED_POLICY.keeps(i, score) for i in ids)


def test_selection_counts_reconcile(tmp_path):
    ids, scores = _ids_and_scores(20_000, seed=3)
    source = tmp_path / "source.parquet"
    pq.write_table(pa.table({"id": ids, "score": scores}), source)
    selection = tmp_path / "selection.parquet"
    with duckdb.connect() as con:
        write_selection(con, [str(source)], selection, SEED_POLICY, ProgressReporter(print, "t", 1))
        counts = selection_counts(con, selection)
    assert sum(rows_in for rows_in, _ in counts.values()) == 20_000
    for bucket in SEED_POLICY.buckets:
        rows_in = sum(1 for s in scores if bucket.contains(s))
        kept = sum(1 for i, s in zip(ids, scores) if bucket.contains(s) and SEED_POLICY.keeps(i, s))
        assert counts[bucket.name] == (rows_in, kept)


def test_policy_change_changes_the_fingerprint():
    changed = SamplingPolicy(seed=43, buckets=SEED_POLICY.buckets)
    assert changed.fingerprint() != SEED_POLICY.fingerprint()


def test_the_policy_fingerprint_is_the_code_version_of_the_assets_applying_it():
    from fw_assets.bucketing.bucketed import bucketed
    from fw_assets.bucketing.sampled import sampled

    for asset in (sampled, bucketed):
        (version,) = asset.code_versions_by_key.values()
        assert version.startswith(SEED_POLICY.fingerprint())
