"""This process's C library, loaded once through ctypes: the few functions archaudit calls
there (memmem, which searches without the GIL; malloc_trim, which returns freed memory).

Each caller gets a function pointer of its own, so one caller's argtypes never change
another's. Where there is no such C library (Windows) or it lacks the function, None: the
caller falls back to the standard library.
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any


@cache
def _library() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):  # TypeError: Windows loads no library by the name None
        return None


def function(name: str) -> Any | None:
    """The C library's function `name` (a fresh ctypes pointer, untyped), or None."""
    library = _library()
    if library is None:
        return None
    try:
        return library[name]
    except AttributeError:
        return None


__all__ = ["function"]
