"""libgpumem_torch's warnings through Python's ``warnings`` module, so that they can be filtered,
recorded or turned into errors like any other: a deprecated spelling read from the configuration
(``GPUMEM_ALLOCATOR=native``, ``GPUMEM_NATIVE_LIBRARY``, ``plugin:PATH``) is a FutureWarning, as the
package's own deprecations are; something the program goes on without (``GPUMEM_TRACE`` could not
start, a bad configuration met by the first allocation) a RuntimeWarning.

The library calls a handler (``gpumem_set_warning_handler``) on the thread whose call raised the
warning. Inside a call of this package (:func:`collected`) the warnings are kept and emitted when
the call returns, at the user's line, so that an ``error`` filter raises from there; elsewhere (an
allocation PyTorch makes) they are emitted at once. Where calling Python could deadlock (PyTorch's
allocator lock held, the trace's writer thread, process exit) the library writes to stderr, as it
does for C users who set no handler.

Only the standard library."""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading
import warnings
from typing import List, Optional, Tuple, Type

# gpumem_torch.h's GPUMEM_TORCH_WARN_* -> the category Python users filter on.
CATEGORIES = {1: FutureWarning, 2: RuntimeWarning}

HANDLER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_local = threading.local()
_handler = None  # the ctypes callback, kept alive as long as the library may call it


def emit(message: str, category: Type[Warning]) -> None:
    """``warnings.warn`` at the innermost frame outside this package (the user's line)."""
    frame: Optional[object] = sys._getframe(0)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):  # type: ignore[attr-defined]
        frame, level = frame.f_back, level + 1  # type: ignore[attr-defined]
    warnings.warn(message, category, stacklevel=level)


def _handle(category: int, message: bytes) -> None:
    text = message.decode("utf-8", "replace")
    cls = CATEGORIES.get(category, RuntimeWarning)
    pending: Optional[List[Tuple[str, Type[Warning]]]] = getattr(_local, "pending", None)
    if pending is not None:
        pending.append((text, cls))
    else:
        emit(text, cls)


class collected:
    """Around this package's calls into the library: the warnings they raise are emitted when the
    block ends (also when it raises), at the user's line. A class rather than a generator, so that
    no frame of contextlib's stands between this package's and the user's."""

    def __enter__(self) -> None:
        self.outer = getattr(_local, "pending", None) is not None  # nested: the outer block emits
        if not self.outer:
            _local.pending = []

    def __exit__(self, *exc: object) -> None:
        if self.outer:
            return
        pending, _local.pending = _local.pending, None
        for text, cls in pending:
            emit(text, cls)


def install(lib: ctypes.CDLL) -> None:
    """Sets the handler in ``lib`` (a library without gpumem_set_warning_handler keeps stderr), and
    takes it back at exit: the library may still warn after the interpreter is gone."""
    global _handler
    if not hasattr(lib, "gpumem_set_warning_handler"):
        return
    setter = lib.gpumem_set_warning_handler
    setter.restype = ctypes.c_void_p
    setter.argtypes = [ctypes.c_void_p]
    _handler = HANDLER_TYPE(_handle)
    setter(ctypes.cast(_handler, ctypes.c_void_p))
    atexit.register(setter, None)
