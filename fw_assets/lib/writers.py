"""A writer used as a context manager keeps its file only when the block succeeds."""

from types import TracebackType


class KeepOnSuccess:
    """`with writer:` calls `finish()` when the block completes and `abort()` when it raises."""

    def finish(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()
