"""Generated dumps with planted near-duplicates, signed and decided as the steps would: what the
tests of the decisions and of explain share (their fixtures are in conftest.py)."""

from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.dedup_quality import DUMPS
from fw_assets.dedup.decide import decide_dump
from fw_assets.dedup.minhash_policy import MINHASH_POLICY, MinhashPolicy
from fw_assets.dedup.signature_files import write_minhash_file

ROWS = 2_000  # per dump


def minhash_files(
    root: Path, out: Path, policy: MinhashPolicy = MINHASH_POLICY, threads: int = 1, batch: int = 500
) -> dict[str, Path]:
    """Each dump's rows split in two score buckets, as bucketed would, signed into out/<dump>.parquet."""
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for dump in DUMPS:
        table = pq.read_table(root / "data" / dump, columns=["id", "text", "score"])
        sources = []
        low = pc.less(table["score"], 3.0)
        for bucket, rows in (("2.8", low), ("3.0", pc.invert(low))):
            path = out / f"{dump}-{bucket}-bucketed.parquet"
            pq.write_table(table.filter(rows), path)
            sources.append((bucket, path))
        files[dump] = out / f"{dump}.parquet"
        with duckdb.connect(":memory:", config={"threads": threads}) as con:
            write_minhash_file(con, sources, files[dump], dump, policy, threads, batch)
    return files


def decide(
    minhash: dict[str, Path], out: Path, order=DUMPS, threads: int = 1, policy=MINHASH_POLICY
) -> dict[str, Path]:
    """Decide `order`'s dumps one after another, each against the earlier dumps' minhash files present."""
    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:", config={"threads": threads})
    try:
        for dump in order:
            earlier = [(d, minhash[d]) for d in DUMPS if d < dump and minhash[d].exists()]
            decide_dump(con, dump, minhash[dump], earlier, out / f"{dump}.parquet", policy, threads)
    finally:
        con.close()
    return {dump: out / f"{dump}.parquet" for dump in DUMPS}


def read(decisions: dict[str, Path]) -> dict[str, list[dict]]:
    return {dump: pq.read_table(path).to_pylist() for dump, path in decisions.items()}
