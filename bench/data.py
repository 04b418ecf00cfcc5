"""Generated benchmark dumps, cached under `bench/work/data/` keyed by size, file count and seed."""

import json
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from bench.texts import PARAGRAPHS, write_dump
from fw_assets.formats.manifest import source_files
from fw_assets.paths import source_dump_dir

# The first dumps of FineWeb-Edu: the bench runs on the first `dumps` of them, and the memory case
# reads four of them as one dump four times larger.
BENCH_DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2013-48", "CC-MAIN-2014-10", "CC-MAIN-2014-15")


def quiet_duckdb() -> duckdb.DuckDBPyConnection:
    """An in-memory connection that prints no progress bar."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    return con


@dataclass(frozen=True)
class DataSpec:
    rows: int  # per dump
    files: int  # per dump
    seed: int = 0
    texts: str = PARAGRAPHS  # the kind of text (bench/texts.py)

    @property
    def key(self) -> str:
        kind = "" if self.texts == PARAGRAPHS else f"-{self.texts}"
        return f"rows{self.rows}-files{self.files}-seed{self.seed}{kind}"


def source_root(work: Path, spec: DataSpec) -> Path:
    """The FW_SOURCE_DIR of a data set: it holds `data/<dump>/train-*.parquet`."""
    return work / "data" / spec.key


def dump_files(work: Path, spec: DataSpec, dump: str) -> list[str]:
    return [str(p) for p in source_files(source_dump_dir(source_root(work, spec), dump))]


def ensure_dumps(work: Path, spec: DataSpec, dumps: tuple[str, ...], log=print) -> Path:
    """Generate the dumps not cached yet; a dump counts as cached once its marker file exists."""
    root = source_root(work, spec)
    for dump in dumps:
        marker = root / f".complete-{dump}"
        if marker.exists():
            continue
        log(f"generating {dump}: {spec.rows:,} rows of {spec.texts} in {spec.files} files under {root} ...")
        began = time.perf_counter()
        write_dump(root, dump, spec.rows, spec.files, spec.seed, spec.texts)
        marker.touch()
        log(f"  {dump} generated in {time.perf_counter() - began:,.0f} s")
    return root


def dump_stats(work: Path, spec: DataSpec, dump: str) -> dict:
    """Rows and UTF-8 bytes of text of a cached dump, counted once and kept beside its marker."""
    cached = source_root(work, spec) / f".stats-{dump}.json"
    if cached.exists():
        return json.loads(cached.read_text())
    with quiet_duckdb() as con:
        rows, text = con.execute(
            "SELECT count(*), sum(strlen(text)) FROM read_parquet($files)",
            {"files": dump_files(work, spec, dump)},
        ).fetchone()
    stats = {"rows": rows, "text_bytes": int(text)}
    cached.write_text(json.dumps(stats))
    return stats
