"""Each benchmark case as a program of its own (`python -m bench.cases.<name>`), so the harness
measures it as a whole process: start-up, wall time and the peak memory of its process tree.

Every case prints one last line `BENCH {json}` with what it did (rows, tokens, ...).
"""

import argparse
import json
from pathlib import Path

RESULT_PREFIX = "BENCH "


def report(**facts) -> None:
    """The case's result line, read by the harness."""
    print(RESULT_PREFIX + json.dumps(facts), flush=True)


def mixture_case_parser() -> argparse.ArgumentParser:
    """The arguments both mixture cases take: where the token files are, the recipe, where the
    cache goes and the dumps planned over."""
    parser = argparse.ArgumentParser()
    parser.add_argument("output_root", type=Path)
    parser.add_argument("recipe", type=Path)
    parser.add_argument("cache_dir", type=Path)
    parser.add_argument("dumps", nargs="+")
    return parser
