"""Tokenizing progress in the run log: documents and tokens so far, rates and time left."""

import time
from collections.abc import Callable

from fw_assets.lib.progress import PROGRESS_INTERVAL_SECONDS, ProgressReporter


class TokenProgress:
    """Counts documents and tokens as batches are written; logs a line every `interval` seconds:

    `tokenizing CC-MAIN-2024-10: 42% (1,234,567 of 2,900,000 documents), 812 documents/s,
    ~2,050s left; 1,312,000,000 tokens, 1,102,000 tokens/s`

    Rates and time left count from the start, so they include the ordering of each bucket.
    """

    def __init__(
        self,
        log: Callable[[str], None],
        label: str,
        total_documents: int,
        interval: float = PROGRESS_INTERVAL_SECONDS,
    ) -> None:
        self.documents = 0
        self.tokens = 0
        self._log = log
        self._reporter = ProgressReporter(self._log_with_tokens, label, total_documents, "documents")
        self._interval = interval
        self._last_report = time.monotonic()

    def add(self, documents: int, tokens: int) -> None:
        """Count a written batch; log if the last line is `interval` seconds old."""
        self.documents += documents
        self.tokens += tokens
        if time.monotonic() - self._last_report >= self._interval:
            self.report()

    def report(self) -> None:
        self._reporter.report(self.documents / max(self._reporter.total, 1))
        self._last_report = time.monotonic()

    def _log_with_tokens(self, line: str) -> None:
        elapsed = time.monotonic() - self._reporter.started
        self._log(f"{line}; {self.tokens:,} tokens, {self.tokens / max(elapsed, 1e-9):,.0f} tokens/s")
