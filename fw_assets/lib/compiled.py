"""The one way a module gets a numba-compiled function, and the one packing of two 32-bit numbers
into a 64-bit key.

Every compiled loop of the package goes through here, with the same options: `nogil` (steps run
loops on several threads), `cache` (compiled once per machine, kept on disk beside the module), and
no `fastmath`, so floating point stays IEEE, one rounding per operation, as Megatron-Core's C++
computes it (the blend's draws must match it bit for bit).

numba is imported only when a function is first compiled: loading the code location (webserver,
daemon, every run) must not load LLVM (fw_assets_tests/test_structure.py).
"""

from functools import cache, update_wrapper

import numpy as np

OPTIONS = {"nogil": True, "cache": True}


def compiled(function):
    """`function` compiled now. For a kernel module that is itself imported only when its step
    runs, whose compiled functions call one another (numba needs the callee compiled)."""
    import numba

    return numba.njit(**OPTIONS)(function)


def compiled_lazily(function):
    """`function`, compiled at its first call (then cached for the process and on disk)."""
    dispatcher = cache(lambda: compiled(function))

    def call(*arguments):
        return dispatcher()(*arguments)

    return update_wrapper(call, function)


# A key holds two numbers below 2^32 each (row numbers of one dump, ranks among its ids): a dump of
# 2^32 documents or more (~15 times FineWeb-Edu's largest) needs a wider key, so it is refused.
PACKED_LIMIT = 1 << 32
_LOW_BITS = np.uint64(0xFFFFFFFF)


def pack_pairs(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """high << 32 | low as uint64 (sorting the keys sorts by high, then low); refuses a value that
    does not fit in 32 bits."""
    high, low = np.asarray(high), np.asarray(low)
    for name, values in (("high", high), ("low", low)):
        if len(values) and (values.min() < 0 or values.max() >= PACKED_LIMIT):
            raise OverflowError(f"{name} numbers span {values.min()}..{values.max()}, outside 0..2^32-1: "
                                "they cannot share a 64-bit key")
    return high.astype(np.uint64) << np.uint64(32) | low.astype(np.uint64)


def unpack_pairs(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(high, low) of pack_pairs' keys, as int64 (ready to index with)."""
    packed = np.asarray(packed, dtype=np.uint64)
    return (packed >> np.uint64(32)).astype(np.int64), (packed & _LOW_BITS).astype(np.int64)
