"""Each benchmark case as a program of its own (`python -m bench.cases.<name>`), so the harness
measures it as a whole process: start-up, wall time and the peak memory of its process tree.

Every case prints one last line `BENCH {json}` with what it did (rows, tokens, ...).
"""

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

RESULT_PREFIX = "BENCH "


def report(**facts) -> None:
    """The case's result line, read by the harness."""
    print(RESULT_PREFIX + json.dumps(facts), flush=True)


def kept_texts(table: "pa.Table", decisions: str | None) -> list[str]:
    """The texts of `table` (columns id, text) that the dedup decisions file keeps (all: None):
    the texts `tokenized` encodes."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if decisions:
        verdicts = pq.read_table(decisions, columns=["id", "keep"])
        table = table.filter(pc.is_in(table.column("id"), verdicts.filter(verdicts.column("keep")).column("id")))
    return table.column("text").to_pylist()


def mixture_case_parser() -> argparse.ArgumentParser:
    """The arguments both mixture cases take: where the token files are, the recipe, where the
    cache goes and the dumps planned over."""
    parser = argparse.ArgumentParser()
    parser.add_argument("output_root", type=Path)
    parser.add_argument("recipe", type=Path)
    parser.add_argument("cache_dir", type=Path)
    parser.add_argument("dumps", nargs="+")
    return parser
