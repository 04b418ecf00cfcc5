"""Freed memory given back to the system at once, for a step whose peak is a few large arrays a
document: allocators keep freed blocks for reuse (glibc's heap; Arrow's mimalloc, which
fw_assets/__init__.py sets to purge at once), so a step that allocates, frees and allocates arrays
of other sizes, one phase after another, grows by what they kept. Measured on `mixture_plan`
(docs/benchmarks.md, 1M to 4M documents): 23 bytes a reweighted document with this, 60 without."""

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

from fw_assets.lib.libc import libc_function

# glibc's mallopt parameter: allocations of this size or more are mapped on their own and unmapped
# when freed. Setting it also stops glibc raising it by itself to the largest block freed so far
# (up to 32 MiB), which is what lets a freed array's memory stay in the heap.
M_MMAP_THRESHOLD = -3
MAPPED_FROM_BYTES = 1 << 16


@contextmanager
def freed_memory_returned() -> Iterator[None]:
    """Within: glibc maps every allocation of 64 KiB or more on its own (numpy's arrays among
    them), and the arrays pyarrow builds from Python and numpy objects come from that malloc too,
    not from Arrow's pool (measured: 23 bytes a reweighted document with both, 28 with glibc's
    alone). What Arrow's C++ code allocates for itself (the Parquet reader, compute results) stays
    in Arrow's pool, which only the environment chooses, when a process starts. The glibc setting
    stays for the rest of the process (glibc cannot restore its own threshold): Dagster runs each
    step in a process of its own."""
    mallopt = libc_function("mallopt", (ctypes.c_int, ctypes.c_int))
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, MAPPED_FROM_BYTES)
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(previous)
