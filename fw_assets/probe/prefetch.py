"""Items made on a thread of their own, a bounded number ahead of whoever uses them: the model
probe reads and tokenizes texts while the device scores the batches before them."""

import queue
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
POLL_SECONDS = 0.1  # how often a maker waiting for room looks whether it is still wanted
_DONE = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


@contextmanager
def prefetched(items: Iterable[T], ahead: int) -> Iterator[Iterator[T]]:
    """`items`, iterated on a thread of its own at most `ahead` items before the consumer. An
    error raised while making an item is raised to the consumer, in order; when the consumer
    leaves early (an error of its own included), the maker stops at its next item and is joined
    before the block exits, so nothing it reads is used after it."""
    ready: queue.Queue = queue.Queue(maxsize=ahead)
    stop = threading.Event()

    def hand_over(item) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def make() -> None:
        iterator = iter(items)
        try:
            for item in iterator:
                if not hand_over(item):
                    return
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, which raises it
            hand_over(_Failed(error))
            return
        finally:  # a generator left early runs its own cleanup here, on the thread it ran on
            getattr(iterator, "close", lambda: None)()
        hand_over(_DONE)

    def taken() -> Iterator[T]:
        while (item := ready.get()) is not _DONE:
            if isinstance(item, _Failed):
                raise item.error
            yield item

    maker = threading.Thread(target=make, name="probe-prefetch", daemon=True)
    maker.start()
    try:
        yield taken()
    finally:
        stop.set()
        maker.join()
