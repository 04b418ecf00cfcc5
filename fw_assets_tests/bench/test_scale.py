"""The scale bench's tables (bench/scale.py): which results they read, and the corpus's CPU- and
wall-hours scaled from dump B's CPU per document."""

import json
from dataclasses import asdict

import pytest

from bench.scale import (
    CORPUS_DUMPS,
    DUMP_STEPS,
    DUMPS,
    RECIPE,
    RECIPE_STEPS,
    ScaleSpec,
    StepResult,
    corpus_table,
    latest_records,
    main,
)

SOURCE, KEPT = 1_300, 450  # dump B's documents: 1e-6 of the corpus's source and kept documents
# Dump B's CPU seconds per step: 72 µs a source document bucketing, then µs a kept document
CPU_B = {"raw,sampled,bucketed": 0.0936, "minhash,band_key_index": 0.036, "deduplicated": 0.018,
         "tokenized": 0.0288, "probe_loss": 0.0576}


def record(rows: int, started: str, *, median_words: int = 464, steps=DUMP_STEPS, earlier: bool = True) -> dict:
    """A scale result: dump A's steps cost 100 times dump B's (the tables read B's alone)."""
    facts = {d: {"documents": SOURCE, "bucketed_documents": KEPT, "bytes": 10**6} for d in DUMPS}
    results = [StepResult(step, dump, SOURCE if step == DUMP_STEPS[0] else KEPT, 1.0,
                          CPU_B[step] * (100 if dump == DUMPS[0] else 1), 2**30, 0, 0, 0.5, 0.5)
               for dump in DUMPS for step in steps]
    results += [StepResult(step, RECIPE, 2 * KEPT, 1.0, 0.01, 2**30, 0, 0, 0.5, 0.5) for step in RECIPE_STEPS]
    if earlier:  # 0.8 µs per document of the earlier dump
        facts = {"dumps": facts, "earlier_dump": {"cpu_without": 1.0, "cpu_against_one": 1.0 + 0.8e-6 * KEPT,
                                                  "earlier_documents": KEPT}}
    else:
        facts = {"dumps": facts}
    return {"spec": asdict(ScaleSpec(rows, 22, median_words=median_words)), "machine": {}, "started": started,
            "facts": facts | {"output_bytes": {}}, "steps": [asdict(r) for r in results]}


def rows_of(table: str) -> dict[str, list[str]]:
    """A markdown table's body rows by their first cell."""
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    return {row[0]: row[1:] for row in cells}


def number(cell: str) -> float:
    return float(cell.strip("*").replace(",", ""))


def test_the_corpus_table_scales_dump_bs_cpu_per_document_to_the_corpus():
    table = rows_of(corpus_table(record(1_000_000, "2026-01-01")))
    hours = {name.split(":")[0]: number(cells[3]) for name, cells in table.items() if ":" in name}
    # source documents for bucketing, kept ones after: 72 µs × 1.3e9, 80 µs × 450e6, ...
    assert hours["bucketing"] == pytest.approx(26.0, abs=0.05)
    assert hours["signing"] == pytest.approx(10.0, abs=0.05)
    assert hours["deciding, against one earlier dump"] == pytest.approx(5.0, abs=0.05)
    assert hours["tokenizing"] == pytest.approx(8.0, abs=0.05)
    assert hours["scoring (built-in probe)"] == pytest.approx(16.0, abs=0.05)
    # Dump k is decided against k earlier dumps, one of them in the row above: 0.8 µs for each
    # further earlier dump's kept document, 450e6 × (0 + 0 + 1 + ... + 108) / 110 of them
    further = sum(range(CORPUS_DUMPS - 1)) / CORPUS_DUMPS
    assert hours["deciding"] == pytest.approx(0.8 * 450 * further / 3600, abs=0.05)
    total = 26 + 10 + 5 + 8 + 16 + 0.8 * 450 * further / 3600
    assert [number(c) for c in table["**all**"][3:]] == pytest.approx([total, total / 2, total / 16, total / 64],
                                                                      abs=0.05)
    read_rate = table[next(name for name in table if name.startswith("reading"))]
    assert number(read_rate[-1]) == pytest.approx(4.2e12 / (total / 64 * 3600) / 1e9, abs=0.01)


def test_without_the_earlier_dumps_cost_the_corpus_table_leaves_its_row_out():
    table = rows_of(corpus_table(record(1_000_000, "2026-01-01", earlier=False)))
    assert not any("further earlier" in name for name in table)
    assert number(table["**all**"][3]) == pytest.approx(26 + 10 + 5 + 8 + 16, abs=0.05)


def write(folder, records: dict[str, dict]) -> None:
    for name, result in records.items():
        (folder / f"scale-{name}.json").write_text(json.dumps(result))


def test_the_tables_read_the_latest_complete_result_of_each_size_with_the_latest_ones_data(tmp_path):
    write(tmp_path, {
        "1m": record(1_000_000, "2026-01-02"),
        "4m-old": record(4_000_000, "2026-01-01"),
        "4m": record(4_000_000, "2026-01-03"),
        "4m-interrupted": record(4_000_000, "2026-01-04", steps=DUMP_STEPS[:3]),
    })
    assert [r["started"] for r in latest_records(tmp_path)] == ["2026-01-02", "2026-01-03"]
    # A later result of other text lengths: the earlier ones are of other data, left out
    write(tmp_path, {"2m-short": record(2_000_000, "2026-01-05", median_words=100)})
    assert [r["started"] for r in latest_records(tmp_path)] == ["2026-01-05"]


def test_the_table_says_when_the_texts_are_not_fineweb_edus_length(tmp_path, capsys):
    write(tmp_path, {"1m": record(1_000_000, "2026-01-01")})
    main(["--table", "--results", str(tmp_path)])
    assert "not FineWeb-Edu's length" not in capsys.readouterr().out
    write(tmp_path, {"1m-short": record(1_000_000, "2026-01-02", median_words=100)})
    main(["--table", "--results", str(tmp_path)])
    assert "Texts of words100-sigma0.837, not FineWeb-Edu's length" in capsys.readouterr().out


def test_the_tables_refuse_a_folder_without_a_complete_result(tmp_path):
    write(tmp_path, {"4m-interrupted": record(4_000_000, "2026-01-04", steps=DUMP_STEPS[:3])})
    with pytest.raises(SystemExit, match="no complete scale result"):
        main(["--table", "--results", str(tmp_path)])
