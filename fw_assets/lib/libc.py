"""The C library's functions that Python's standard library does not wrap (glibc's malloc_trim,
Linux's sync_file_range), looked up once, when first needed, not when a module is imported."""

import ctypes
import ctypes.util
from collections.abc import Callable
from functools import cache


@cache
def _libc() -> ctypes.CDLL | None:
    path = ctypes.util.find_library("c")
    return ctypes.CDLL(path, use_errno=True) if path else None


@cache
def libc_function(name: str, argtypes: tuple, restype=ctypes.c_int) -> Callable | None:
    """The C library's `name` with its C signature (its errno: ctypes.get_errno()), or None where
    this C library has no such function."""
    libc = _libc()
    function = getattr(libc, name, None) if libc is not None else None
    if function is not None:
        function.argtypes, function.restype = list(argtypes), restype
    return function
