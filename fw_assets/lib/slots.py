"""Slots of this machine's cores for heavy steps, held as `flock`s so a killed run frees its own.

A step that uses every core (DuckDB, the tokenizer) holds one of `limit` slots of its pool while it
works. Each slot is a lock file under `<folder>/<pool>.<i>.lock`; the kernel releases a `flock`
when its process ends, however it ends (kill -9, OOM killer), so no slot outlives its run. The
holder writes who it is into the file, so a step that waits can say which run holds the slot.
"""

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

# Seconds between tries for a slot, and between "still waiting" lines in the log.
POLL_SECONDS = 2.0
REMIND_SECONDS = 60.0


@contextmanager
def machine_slot(
    folder: Path,
    pool: str,
    limit: int,
    holder: dict[str, str],
    log: Callable[[str], None],
    how_to_free: Callable[[dict], str],
) -> Iterator[int]:
    """Hold one of `limit` slots of `pool`; yields the slot's number. While all are held, log who
    holds them and `how_to_free(holder)` of each, and try again every POLL_SECONDS (a plain sleep:
    Ctrl-C and SIGTERM stop the wait)."""
    folder.mkdir(parents=True, exist_ok=True)
    waited_since = reminded = None
    while (taken := _take_free_slot(folder, pool, limit)) is None:
        now = time.monotonic()
        if reminded is None or now - reminded >= REMIND_SECONDS:
            waited_since = waited_since or now
            reminded = now
            log(_waiting_message(folder, pool, limit, how_to_free))
        time.sleep(POLL_SECONDS)
    slot, handle = taken
    try:
        _write_holder(handle, holder)
        if waited_since is not None:
            log(f"Got a {pool} slot after waiting {time.monotonic() - waited_since:,.0f}s.")
        yield slot
    finally:
        handle.truncate(0)
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _take_free_slot(folder: Path, pool: str, limit: int) -> tuple[int, IO] | None:
    for slot in range(max(limit, 1)):
        handle = open(folder / f"{pool}.{slot}.lock", "a+")
        if _try_lock(handle):
            return slot, handle
        handle.close()
    return None


def slot_holders(folder: Path, pool: str) -> list[dict]:
    """Who holds each slot of `pool` right now, as the holders wrote it (unheld slots left out)."""
    holders = []
    for path in sorted(folder.glob(f"{pool}.*.lock")):
        with open(path, "a+") as handle:
            if _try_lock(handle):  # free: whatever it says is from a run that has ended
                fcntl.flock(handle, fcntl.LOCK_UN)
                continue
            handle.seek(0)
            try:
                holders.append(json.loads(handle.read()))
            except json.JSONDecodeError:
                holders.append({})  # taken a moment ago, not written yet
    return holders


def _try_lock(handle: IO) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _write_holder(handle: IO, holder: dict[str, str]) -> None:
    handle.seek(0)
    handle.truncate(0)
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    handle.write(json.dumps({**holder, "pid": os.getpid(), "since": since}))
    handle.flush()


def _waiting_message(folder: Path, pool: str, limit: int, how_to_free: Callable[[dict], str]) -> str:
    holders = slot_holders(folder, pool)
    held = "; ".join(how_to_free(h) for h in holders) or "a run that is just starting"
    return (
        f"Waiting for a {pool} slot (this machine runs {limit} {pool} step(s) at a time): {held}. "
        "A slot is freed as soon as the run holding it ends, also when it is killed. "
        "Ctrl-C or terminating this run stops the wait."
    )
