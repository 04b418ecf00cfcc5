"""Progress in the run log for long steps: share done, rows/s and time left, at a fixed interval."""

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError
from typing import Any

import duckdb

PROGRESS_INTERVAL_SECONDS = 20.0


class Stopwatch:
    """Seconds since it was made, rounded for metadata."""

    def __init__(self) -> None:
        self._started = time.monotonic()

    def seconds(self) -> float:
        return round(time.monotonic() - self._started, 2)


class ProgressReporter:
    """Logs `label: 42% (1,234,567 of 2,900,000 rows), 81,234 rows/s, ~20s left` when called."""

    def __init__(self, log: Callable[[str], None], label: str, total: int, unit: str = "rows"):
        self.log = log
        self.label = label
        self.total = total
        self.unit = unit
        self.started = time.monotonic()

    def report(self, done_share: float) -> None:
        elapsed = time.monotonic() - self.started
        if done_share <= 0:
            self.log(f"{self.label}: started {elapsed:,.0f}s ago, no progress estimate yet")
            return
        done = int(self.total * done_share)
        left = elapsed * (1 - done_share) / done_share
        self.log(
            f"{self.label}: {done_share:.0%} ({done:,} of {self.total:,} {self.unit}), "
            f"{done / max(elapsed, 1e-9):,.0f} {self.unit}/s, ~{left:,.0f}s left"
        )


def run_with_progress(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    parameters: dict[str, Any],
    reporter: ProgressReporter,
    interval: float = PROGRESS_INTERVAL_SECONDS,
) -> list[tuple]:
    """Execute one statement, logging DuckDB's own query progress every `interval` seconds."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(lambda: con.execute(sql, parameters).fetchall())
        return wait_with_progress(con, running, reporter, interval)


def wait_with_progress(
    con: duckdb.DuckDBPyConnection,
    running: Future,
    reporter: ProgressReporter,
    interval: float = PROGRESS_INTERVAL_SECONDS,
) -> Any:
    """The result of `running`, a query on `con` in another thread; logs its progress meanwhile."""
    while True:
        try:
            return running.result(timeout=interval)
        except TimeoutError:
            reporter.report(max(con.query_progress(), 0.0) / 100.0)
        except BaseException:
            con.interrupt()
            raise
