"""Each benchmark case as a program of its own (`python -m bench.cases.<name>`), so the harness
measures it as a whole process: start-up, wall time and the peak memory of its process tree.

Every case prints one last line `BENCH {json}` with what it did (rows, tokens, ...).
"""

import json

RESULT_PREFIX = "BENCH "


def report(**facts) -> None:
    """The case's result line, read by the harness."""
    print(RESULT_PREFIX + json.dumps(facts), flush=True)
