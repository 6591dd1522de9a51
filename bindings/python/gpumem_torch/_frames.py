"""Python frames as allocation tags (``record(path, frames=True)``): the hook libgpumem_torch.so
calls for each allocation while such a trace is recorded, which names the innermost user frame.

The library does not link Python: it calls a ctypes callback (which takes the GIL) and asks
nothing while frames are off. Cheap on the way back: whether a code object is PyTorch's or the
runtime's is decided once per code object, and the tag of an instruction once per recording; the library interns the names (at most 1024 a trace) and names the 12 that allocated
the most bytes in the header, as ``gpumem replay`` does for a PyTorch snapshot's frames.

Only the standard library."""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import sys
from typing import Any, Dict, List, Optional

# The tags the header names by default: gpumem replay's default for a snapshot's frames.
DEFAULT_NAMED_FRAMES = 12
# The most the library names (gpumem_trace_start_frames).
MAX_NAMED_FRAMES = 64
# The most entries each cache holds before it is emptied (a program that makes code objects
# without end, e.g. exec in a loop, cannot grow them past this).
_MAX_CACHED = 1 << 16

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)).replace("\\", "/") + "/"
_TORCH = re.compile(r"(^|/)torch/")
_NATIVE = re.compile(r"\.(c|cc|cpp|cxx|cu|h|hpp|cuh|so)(\.\d+)*$")
_STDLIB = re.compile(r"(^|/)python\d+(\.\d+)?/")

HOOK_TYPE = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint64)


def is_internal_frame(filename: str) -> bool:
    """A frame of PyTorch, of the Python runtime or of this package, not the user's: the rule of
    ``gpumem replay``'s snapshot reader (packages/trace/src/snapshot/snapshot.ts,
    ``isInternalFrame``): files under a ``torch/`` folder, ``<frozen ...>`` and ``<string>``, the
    standard library (a ``pythonX.Y/`` folder outside ``site-packages/``), native sources; and
    gpumem_torch's own files."""
    f = filename.replace("\\", "/")
    if f == "" or f == "??" or f.startswith("<"):
        return True
    if f.startswith(_PACKAGE_DIR):
        return True
    if _TORCH.search(f) or _NATIVE.search(f):
        return True
    return bool(_STDLIB.search(f)) and "/site-packages/" not in f and "/dist-packages/" not in f


def frame_name(code: Any, line: Optional[int]) -> str:
    """A frame's tag name, as the snapshot reader writes it: ``file:line:function``."""
    return f"{code.co_filename}:{line if line is not None else '?'}:{code.co_name}"


class _FrameTagger:
    """The hook's state: the library (its PyDLL view, called with the GIL held), and per code
    object seen, keyed by id() (a code object's own hash is computed from its contents at every
    lookup): the object (kept alive, so that its id is not reused), whether it is not the user's,
    and the tags of its instructions in the current recording."""

    def __init__(self) -> None:
        self.lib: Optional[ctypes.PyDLL] = None
        self.recording = -1
        self.codes: Dict[int, List[Any]] = {}  # id(code) -> [code, internal, {f_lasti: tag}]
        self.tagged = 0  # (code, instruction) pairs holding a tag

    def bind(self, path: str) -> None:
        # PyDLL: gpumem_trace_frame_tag is a short call; keeping the GIL across it saves a
        # release and a re-acquisition per new frame.
        lib = ctypes.PyDLL(path)
        lib.gpumem_trace_frame_tag.restype = ctypes.c_uint32
        lib.gpumem_trace_frame_tag.argtypes = [ctypes.c_uint64, ctypes.c_char_p]
        self.lib = lib

    def tag(self, recording: int, frame: Any) -> int:
        """The tag of the innermost user frame from ``frame`` outwards (0: none, "other")."""
        codes = self.codes
        if recording != self.recording:
            # Tags are per recording: those of the last one mean nothing in this one.
            for entry in codes.values():
                entry[2].clear()
            self.tagged = 0
            self.recording = recording
        known = codes.get
        while frame is not None:
            code = frame.f_code
            entry = known(id(code))
            if entry is None or entry[0] is not code:
                if len(codes) >= _MAX_CACHED:
                    codes.clear()
                entry = codes[id(code)] = [code, is_internal_frame(code.co_filename), {}]
            if not entry[1]:
                # By instruction, not line: f_lasti is read as it is, f_lineno looked up in the
                # code's line table; the line is found once per instruction and recording.
                tags = entry[2]
                at = frame.f_lasti
                tag = tags.get(at)
                if tag is None:
                    if self.tagged >= _MAX_CACHED:
                        for e in codes.values():
                            e[2].clear()
                        self.tagged = 0
                    name = frame_name(code, frame.f_lineno).encode("utf-8", "surrogateescape")
                    tag = tags[at] = self.lib.gpumem_trace_frame_tag(recording, name) if self.lib else 0
                    self.tagged += 1
                return tag
            frame = frame.f_back
        return 0


_tagger = _FrameTagger()


def _hook(recording: int) -> int:
    # Called by the library (a ctypes callback: the GIL is held here). Frame 1 is the Python code
    # that was running when PyTorch (or a C caller) entered the library. Never raises: an
    # exception in a ctypes callback would be printed and the allocation tagged 0 anyway.
    try:
        return _tagger.tag(recording, sys._getframe(1))
    except BaseException:
        return 0


_hook_function = HOOK_TYPE(_hook)  # kept alive for as long as the library may call it
_installed_in: Optional[ctypes.CDLL] = None


def install(lib: ctypes.CDLL, path: str) -> None:
    """Registers the hook with the library (once per process)."""
    global _installed_in
    if _installed_in is lib:
        return
    if not hasattr(lib, "gpumem_trace_set_frame_hook"):
        raise RuntimeError(f"gpumem: {path} cannot record Python frames (no gpumem_trace_set_frame_hook); rebuild it")
    _tagger.bind(path)
    lib.gpumem_trace_set_frame_hook.restype = None
    lib.gpumem_trace_set_frame_hook.argtypes = [HOOK_TYPE]
    lib.gpumem_trace_set_frame_hook(_hook_function)
    _installed_in = lib
    # Before the interpreter is torn down: an allocation after that must not call into Python.
    atexit.register(uninstall)


def uninstall() -> None:
    """Clears the hook: allocations are no longer tagged (a recording goes on without frames)."""
    global _installed_in
    lib = _installed_in
    if lib is not None:
        lib.gpumem_trace_set_frame_hook(HOOK_TYPE())  # NULL
        _installed_in = None


def simulate(count: int, size: int) -> None:
    """Records ``count`` allocations of ``size`` bytes and their frees through the library's trace
    path (``gpumem_trace_simulate``: the path of gpumem_malloc, the frame hook included, without
    allocating; nothing is recorded when no trace is). For tests and benchmarks on a machine
    without a GPU.
    This package's frames are skipped, so the tags name the caller's line."""
    from . import _library

    lib = _library.load()
    lib.gpumem_trace_simulate.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.gpumem_trace_simulate.restype = ctypes.c_int
    if lib.gpumem_trace_simulate(count, size) != 0:
        raise RuntimeError(_library.last_error())


def check_named_frames(value: Any) -> int:
    """``frames=`` of :func:`gpumem_torch.record`: True is the default count, an int that count."""
    if value is True:
        return DEFAULT_NAMED_FRAMES
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NAMED_FRAMES:
        raise ValueError(
            f"Expected True or an integer from 1 to {MAX_NAMED_FRAMES} for frames but received {value!r} of type {type(value).__name__}"
        )
    return value
