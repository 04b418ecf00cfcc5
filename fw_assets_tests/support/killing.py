"""Kill -9 in the middle of publishing: a child process that SIGKILLs itself right after the rename
a test chooses, so the test sees what a killed run leaves behind."""

import os
import signal
from collections.abc import Callable


def die_after_rename(should_die: Callable[[int, str, str], bool]) -> None:
    """From now on this process SIGKILLs itself right after the rename for which
    `should_die(renames done so far, source, destination)` is true."""
    real_rename = os.rename
    done = 0

    def rename_then_die(source, destination):
        nonlocal done
        real_rename(source, destination)
        done += 1
        if should_die(done, str(source), str(destination)):
            os.kill(os.getpid(), signal.SIGKILL)

    os.rename = rename_then_die
