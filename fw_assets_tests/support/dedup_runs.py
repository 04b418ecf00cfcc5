"""Two generated dumps for the dedup assets' tests, and reading what their runs said."""

import re

import dagster as dg

EARLY, LATE = "CC-MAIN-2013-20", "CC-MAIN-2013-48"
ROWS = 1_500  # per dump


def example_rows(markdown: str) -> list[list[str]]:
    """The cells of the example pairs' table (escaped pipes inside texts kept)."""
    return [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in markdown.splitlines()[2:]]


def failure_message(result: dg.ExecuteInProcessResult) -> str:
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    return failure.step_failure_data.error.message + str(failure.step_failure_data.user_failure_data)
