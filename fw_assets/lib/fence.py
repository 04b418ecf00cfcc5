"""The fence every publication passes (fw_assets.lib.publish calls `pass_fence` under the
publication's lock, just before its first rename): a step that publishes names a guard, which lets
the publication go on or stops it. The steps' guard (fw_assets.run_health) stops the process of a
run that is no longer the live run of its partition: run monitoring failed it, or a person
terminated it, while the process still ran. Outside a guarded step (plain code, tests,
benchmarks) publications pass unchecked."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# guard(what): returns to let `what` go on ("publishing <name>", "starting <step> of <dump>",
# "reporting <name> unchanged"); raises, or ends the process, to stop it.
Guard = Callable[[str], None]

_guard: ContextVar[Guard | None] = ContextVar("publication_guard", default=None)


@contextmanager
def guarded_by(guard: Guard) -> Iterator[None]:
    """Every publication made in the body (in this thread) passes `guard` first."""
    token = _guard.set(guard)
    try:
        yield
    finally:
        _guard.reset(token)


def pass_fence(what: str) -> None:
    """Called before `what` (a publication's renames, a step's start, an output reported
    unchanged); returns only if it may go on."""
    guard = _guard.get()
    if guard is not None:
        guard(what)
