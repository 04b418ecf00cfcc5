"""The process in which a worker executes one run (fw_assets.deploy.run_supervisor starts it, in a
process group of its own):

    python -m fw_assets.deploy.run_process RUN_ID WORKER_PID

It executes the run as Dagster's own run worker does, on the instance of DAGSTER_HOME, and dies with
its worker (Linux's parent-death signal). Signals sent to the worker's process group (`local.sh
down`, Ctrl-C in the worker's terminal) reach the worker alone, which decides how its run stops:
Dagster would turn a SIGTERM or SIGINT of the run process into an interrupted step, a failure of
the run's data that run retries do not retry. (Under systemd, `KillMode=mixed` does the same for
the worker's control group.)
"""

import ctypes
import os
import signal
import sys

import dagster as dg
from dagster._cli.api import _execute_run_command_body

from fw_assets.lib.libc import libc_function

PR_SET_PDEATHSIG = 1


def die_with(worker: int) -> None:
    """SIGKILL this process when its parent (the worker, pid `worker`) dies; exit now if it already did."""
    prctl = libc_function("prctl", (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong))
    if prctl is None or prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise SystemExit("run_process: cannot ask to die with the worker (prctl PR_SET_PDEATHSIG)")
    if os.getppid() != worker:
        raise SystemExit(f"run_process: the worker (pid {worker}) is gone; the run is not executed here")


def main(argv: list[str] | None = None) -> None:
    run_id, worker = argv if argv is not None else sys.argv[1:]
    die_with(int(worker))
    with dg.DagsterInstance.get() as instance:
        sys.exit(_execute_run_command_body(run_id, instance, lambda _event: None, set_exit_code_on_failure=True))


if __name__ == "__main__":
    main()
