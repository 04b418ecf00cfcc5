"""Tests of the FineWeb-Edu-shaped sample generator (fw_assets.synthetic)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fw_assets.paths import planted_truth_path
from fw_assets.synthetic import (
    SCHEMA,
    sample_scores,
    sample_table,
    write_sample_dump,
    write_sample_dumps,
)
from fw_assets.synthetic.__main__ import main
from fw_assets.synthetic.generator import (
    FINEWEB_EDU_MEDIAN_WORDS,
    FINEWEB_EDU_WORDS_SIGMA,
    planted_templates,
    write_parquet_atomically,
)

DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2013-48")
ROWS = 6_000  # per dump

EXPECTED_SCHEMA = pa.schema(
    [
        ("text", pa.string()),
        ("id", pa.string()),
        ("dump", pa.string()),
        ("url", pa.string()),
        ("file_path", pa.string()),
        ("language", pa.string()),
        ("language_score", pa.float64()),
        ("token_count", pa.int64()),
        ("score", pa.float64()),
        ("int_score", pa.int64()),
    ]
)
ID = re.compile(r"<urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}>")


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[Path, dict[str, list[Path]]]:
    root = tmp_path_factory.mktemp("sample")
    return root, write_sample_dumps(root, DUMPS, rows_per_dump=ROWS, files_per_dump=2, seed=0)


@pytest.fixture(scope="module")
def tables(sample) -> dict[str, pa.Table]:
    _, files = sample
    return {dump: pa.concat_tables(map(pq.read_table, paths)) for dump, paths in files.items()}


def test_files_are_named_like_a_hugging_face_snapshot(sample):
    root, files = sample
    for dump in DUMPS:
        assert files[dump] == [
            root / "data" / dump / "train-00000-of-00002.parquet",
            root / "data" / dump / "train-00001-of-00002.parquet",
        ]
    assert sorted(p.name for p in (root / "data").rglob("*")) == sorted(
        [*DUMPS] + [p.name for d in DUMPS for p in files[d]]
    )  # no temp files left behind


def test_schema_row_groups_and_compression(sample):
    _, files = sample
    assert SCHEMA == EXPECTED_SCHEMA
    for path in files[DUMPS[0]]:
        meta = pq.ParquetFile(path).metadata
        assert pq.read_schema(path).equals(EXPECTED_SCHEMA)  # names, order and types
        assert meta.num_rows == ROWS // 2
        assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [1000] * 3
        assert meta.row_group(0).column(0).compression == "SNAPPY"


def test_columns_follow_the_contract(tables):
    for dump, t in tables.items():
        assert t.num_rows == ROWS
        assert set(t["dump"].to_pylist()) == {dump}
        assert set(t["language"].to_pylist()) == {"en"}
        lang = t["language_score"].to_numpy()
        assert lang.min() >= 0.65 and lang.max() <= 1.0
        file_path = re.compile(
            rf"s3://commoncrawl/crawl-data/{dump}/segments/\d{{13}}\.\d+/warc/"
            r"CC-MAIN-\d{14}-\d{5}\.warc\.gz"
        )
        assert all(file_path.fullmatch(p) for p in t["file_path"].to_pylist())
        url = re.compile(r"https://www\.[a-z]+\.com/[a-z]+/[a-z]+-[a-z]+")
        assert all(url.fullmatch(u) for u in t["url"].to_pylist())
        words = pc.list_value_length(pc.utf8_split_whitespace(t["text"])).to_numpy()
        assert np.array_equal(t["token_count"].to_numpy(), np.rint(1.3 * words))


def test_ids_are_uuid4_urns_unique_across_dumps(tables):
    ids = [i for t in tables.values() for i in t["id"].to_pylist()]
    assert all(ID.fullmatch(i) for i in ids)
    assert len(set(ids)) == len(ids) == 2 * ROWS


SEED_QUANTILES = {0.5: 2.9062, 0.75: 3.2344, 0.9: 3.5781, 0.95: 3.7812, 0.99: 4.125}


def test_scores_follow_the_seed_distribution():
    scores = sample_scores(np.random.default_rng(1), 50_000)  # what the generator draws from
    assert np.all(scores * 64 == np.round(scores * 64))  # bfloat16-like: multiples of 1/64
    assert scores.min() == 2.515625 and scores.max() <= 5.21875
    quantiles = np.quantile(scores, list(SEED_QUANTILES))
    assert quantiles == pytest.approx(list(SEED_QUANTILES.values()), abs=0.04)
    assert scores.mean() == pytest.approx(3.0, abs=0.03)
    assert scores.std() == pytest.approx(0.40, abs=0.02)
    for boundary in (3.0, 3.5, 4.0):  # bucket boundaries are hit exactly
        assert (scores == boundary).sum() >= 50
    assert ((scores >= 2.796875) & (scores <= 2.8125)).sum() >= 1_000


def test_written_scores_have_the_same_distribution(tables):
    scores = np.concatenate([t["score"].to_numpy() for t in tables.values()])
    assert np.all(scores * 64 == np.round(scores * 64))
    assert scores.min() >= 2.515625 and scores.max() <= 5.21875
    quantiles = np.quantile(scores, list(SEED_QUANTILES))
    assert quantiles == pytest.approx(list(SEED_QUANTILES.values()), abs=0.08)


def test_int_score_is_python_round_of_clamped_score(tables):
    for t in tables.values():
        expected = [int(round(min(max(s, 0.0), 5.0))) for s in t["score"].to_pylist()]
        assert t["int_score"].to_pylist() == expected


def test_text_lengths_are_web_page_like_and_heavy_tailed(tables):
    lengths = np.concatenate([pc.binary_length(t["text"]).to_numpy() for t in tables.values()])
    assert 2_000 <= np.median(lengths) <= 6_000
    assert lengths.max() >= 10 * np.median(lengths)
    assert lengths.max() <= 250_000
    text = tables[DUMPS[0]]["text"][0].as_py()
    assert text[0].isupper() and text.endswith(".") and ". " in text


def test_fineweb_edu_lengths_give_its_median_and_mean_characters():
    """FineWeb-Edu's texts: 2,398 characters median, 3,403 mean (the default's are longer, its tail heavier)."""
    table = sample_table(DUMPS[0], 0, 10_000, median_words=FINEWEB_EDU_MEDIAN_WORDS,
                         words_sigma=FINEWEB_EDU_WORDS_SIGMA)
    characters = pc.utf8_length(table["text"]).to_numpy()
    assert np.median(characters) == pytest.approx(2_398, rel=0.03)
    assert characters.mean() == pytest.approx(3_403, rel=0.03)


def test_words_sigma_sets_the_tail_and_not_the_median():
    narrow, wide = (pc.utf8_length(sample_table(DUMPS[0], 0, 10_000, words_sigma=sigma)["text"]).to_numpy()
                    for sigma in (0.5, 1.0))
    assert np.median(narrow) == pytest.approx(np.median(wide), rel=0.05)
    assert narrow.mean() / np.median(narrow) == pytest.approx(np.exp(0.5**2 / 2), rel=0.03)
    assert wide.mean() / np.median(wide) == pytest.approx(np.exp(1.0**2 / 2), rel=0.03)


def test_planted_near_duplicates_across_and_within_dumps_and_their_ground_truth(sample, tables):
    root, _ = sample
    copies: dict[int, list[str]] = {}  # template -> texts of its copies, over both dumps
    for dump in DUMPS:
        truth = pq.read_table(planted_truth_path(root, dump)).to_pydict()
        assert 0.05 <= len(truth["id"]) / ROWS <= 0.07  # default 5% across dumps + 1% twins
        text = dict(zip(tables[dump]["id"].to_pylist(), tables[dump]["text"].to_pylist()))
        for doc, template in zip(truth["id"], truth["template"]):
            copies.setdefault(template, []).append(text[doc])
    assert {len(texts) for texts in copies.values()} == {2, 4}  # one copy per dump, or twins in each
    for texts in copies.values():
        for a, b in zip(texts, texts[1:]):
            wa, wb = a.split(), b.split()
            assert len(wa) == len(wb)
            changed = sum(x != y for x, y in zip(wa, wb))
            assert 1 <= changed <= 2 * (1 + len(wa) // 200)  # each copy has a few edits of its own
    earlier, later = (set(tables[d]["id"].to_pylist()) for d in DUMPS)
    assert not earlier & later


def test_rows_that_copy_nothing_do_not_depend_on_the_twin_share():
    with_twins = sample_table(DUMPS[0], 0, 2_000, twin_share=0.05)
    without = sample_table(DUMPS[0], 0, 2_000, twin_share=0.0)
    same = planted_templates(0, 0, 2_000, twin_share=0.05) == planted_templates(0, 0, 2_000, twin_share=0.0)
    assert 40 <= (~same).sum() <= 120  # ~5% of rows become twins (fewer: none that copy across dumps)
    assert with_twins.filter(same).equals(without.filter(same))
    assert not with_twins.filter(~same)["text"].equals(without.filter(~same)["text"])


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    first = write_sample_dump(tmp_path / "a", DUMPS[0], rows=1_500, files=2, seed=7)
    again = write_sample_dump(tmp_path / "b", DUMPS[0], rows=1_500, files=2, seed=7)
    other = write_sample_dump(tmp_path / "c", DUMPS[0], rows=1_500, files=2, seed=8)
    for a, b, c in zip(first, again, other):
        assert a.read_bytes() == b.read_bytes()
        assert a.read_bytes() != c.read_bytes()


def test_rerun_replaces_stale_files(tmp_path):
    write_sample_dump(tmp_path, DUMPS[0], rows=30, files=3)
    paths = write_sample_dump(tmp_path, DUMPS[0], rows=30, files=1)
    assert sorted((tmp_path / "data" / DUMPS[0]).iterdir()) == paths


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    def chunks():
        yield sample_table("CC-MAIN-2013-20", 0, 10)
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        write_parquet_atomically(tmp_path / "train-00000-of-00001.parquet", chunks())
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments_are_rejected(tmp_path):
    for name in ("2013-20", "CC-MAIN-٢٠١٣-٢٠", "CC-MAIN-2013-20\n"):  # other digits, a trailing newline
        with pytest.raises(ValueError, match="CC-MAIN-YYYY-WW"):
            write_sample_dump(tmp_path, name, rows=10)
    with pytest.raises(ValueError, match="files"):
        write_sample_dump(tmp_path, DUMPS[0], rows=10, files=0)
    for sigma in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="words_sigma"):
            write_sample_dump(tmp_path, DUMPS[0], rows=10, words_sigma=sigma)
    assert not (tmp_path / "data").exists()


def test_cli(tmp_path, capsys):
    main([str(tmp_path), "--dumps", "CC-MAIN-2014-10", "--rows", "40", "--files", "2"])
    folder = tmp_path / "data" / "CC-MAIN-2014-10"
    assert sorted(p.name for p in folder.iterdir()) == [
        "train-00000-of-00002.parquet",
        "train-00001-of-00002.parquet",
    ]
    assert pq.read_table(folder).num_rows == 40
    assert "CC-MAIN-2014-10: 40 rows" in capsys.readouterr().out


def test_cli_lengths(tmp_path, capsys):
    main([str(tmp_path), "--dumps", "CC-MAIN-2014-10", "--rows", "400", "--median-words", "100", "--words-sigma", "0"])
    words = pc.list_value_length(pc.utf8_split_whitespace(pq.read_table(tmp_path / "data")["text"]))
    assert set(words.to_pylist()) == {100}  # sigma 0: every text of the median's length
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--rows", "40", "--words-sigma", "-1"])
    assert "words_sigma" in capsys.readouterr().err
