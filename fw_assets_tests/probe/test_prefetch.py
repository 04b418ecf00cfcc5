"""Items made on a thread ahead of their consumer: in order, never more than `ahead` waiting, an
error raised to the consumer in its place, and a consumer leaving early stops the maker, whose
own cleanup runs before the block ends."""

import threading
import time

import pytest

from fw_assets.probe.prefetch import prefetched


def test_items_come_in_order_made_on_another_thread():
    threads = []

    def items():
        for i in range(50):
            threads.append(threading.current_thread())
            yield i

    with prefetched(items(), ahead=3) as ready:
        assert list(ready) == list(range(50))
    assert set(threads) != {threading.current_thread()} and len(set(threads)) == 1


def test_the_maker_waits_while_ahead_items_are_waiting():
    made = []

    def items():
        for i in range(20):
            made.append(i)
            yield i

    with prefetched(items(), ahead=2) as ready:
        first = next(ready)
        time.sleep(0.3)  # time for the maker to run as far ahead as it may
        assert first == 0 and len(made) <= 1 + 2 + 1, "taken, waiting, and one in the maker's hand"


def test_an_error_making_an_item_is_raised_to_the_consumer_after_the_items_before_it():
    def items():
        yield from range(3)
        raise KeyError("row group 7 is damaged")

    taken = []
    with pytest.raises(KeyError, match="row group 7 is damaged"):
        with prefetched(items(), ahead=2) as ready:
            for item in ready:
                taken.append(item)
    assert taken == [0, 1, 2]


def test_a_consumer_leaving_early_stops_the_maker_and_its_cleanup_runs_before_the_block_ends():
    state = {"made": 0, "closed": False}

    def items():
        try:
            while True:
                state["made"] += 1
                yield state["made"]
        finally:
            state["closed"] = True

    with pytest.raises(RuntimeError, match="the device failed"):
        with prefetched(items(), ahead=2) as ready:
            next(ready)
            raise RuntimeError("the device failed")
    assert state["closed"] and state["made"] <= 5
    assert not [t for t in threading.enumerate() if t.name == "probe-prefetch"]
