"""Giving freed memory back to the operating system.

A model's arrays are large (the spam preset's learner: three 8 MiB float64 arrays; a served
model: one) and glibc's allocator keeps most of what such arrays free inside the process
(its mmap threshold grows past them after the first free, so later ones come from the heap,
which it trims only from the top). A worker that releases idle models, or an API process
that evicts models from its cache, would keep their memory resident. :func:`trim` asks
glibc to return every free page (``malloc_trim(0)``); callers do it after freeing models,
not per request. Elsewhere (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any


@functools.cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def trim() -> bool:
    """Return free heap memory to the OS; True if glibc did release some."""
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
