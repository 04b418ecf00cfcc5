"""`map` on a few threads that keeps the input order and bounds the work held in memory."""

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor


def ordered_map(function: Callable, items: Iterable, threads: int, in_flight: int) -> Iterator:
    """`map(function, items)` on `threads` threads, yielded in input order, with at most
    `in_flight` results computed or under way ahead of the consumer (so at most that many held)."""
    if threads <= 1:
        yield from map(function, items)
        return
    with ThreadPoolExecutor(threads) as pool:
        pending = deque()
        for item in items:
            pending.append(pool.submit(function, item))
            if len(pending) >= in_flight:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
