"""gpumem's allocation strategies inside PyTorch, with memory statistics.

PyTorch lets a shared library replace its CUDA caching allocator
(``torch.cuda.memory.CUDAPluggableAllocator``) or provide the memory of a ``torch.cuda.MemPool``,
but a pluggable allocator loses PyTorch's memory statistics: ``torch.cuda.memory_stats()`` raises
(pytorch/pytorch#133281). This package carries ``libgpumem_torch.so`` (gpumem's strategies behind
PyTorch's allocator interface) and reads the statistics the library keeps itself::

    import gpumem_torch
    gpumem_torch.enable()                 # the whole process (expandable, the default); before anything touches CUDA
    import torch
    x = torch.randn(1024, 1024, device="cuda")
    gpumem_torch.memory_stats()["allocated_bytes.all.current"]   # 4194304

or for part of a program, beside PyTorch's own allocator::

    alloc = gpumem_torch.allocator("uvm")
    pool = alloc.mem_pool()                          # torch.cuda.MemPool
    with torch.cuda.use_mem_pool(pool):
        states = torch.zeros(n, device="cuda")       # in managed memory
    alloc.memory_stats()

Strategies (the names of gpumem's registry): ``cuda``, ``uvm``, ``pool``, ``async``,
``plugin`` (a plug-in library; ``native``, its older name, and ``plugin:PATH`` are deprecated
spellings), ``expandable`` (the default), ``pinned``, ``tiered`` and ``caching`` (PyTorch's caching
allocator's rules): every registered strategy but ``host``, whose memory CUDA kernels cannot use.
:func:`strategies` lists them with their options, as the library's registry describes them, and
:data:`STRATEGIES` names them; both, and the option keywords, are read from the library when first
needed.
Out of memory follows PyTorch's convention ("CUDA out of memory. ..."). See docs/torch.md.

The library is found at ``$GPUMEM_TORCH_LIB``, else inside this package (the wheel), else at
``native/build/Release/libgpumem_torch.so`` of the repository this package sits in.

Allocation traces: ``record(path)`` ... ``stop()`` writes every allocation and free the library
serves in between to ``path`` (gpumem's JSONL trace, or RMM's CSV for a ``.csv`` path), for
``gpumem replay``; ``record(path, frames=True)`` tags each allocation with the Python line that made
it; ``GPUMEM_TRACE=path`` records the whole process instead (docs/torch.md).

Sleep and wake by tag (``expandable``, ``tiered``): ``with region("kv"): ...`` tags what is
allocated inside; ``sleep(["kv"])`` gives the tag's physical memory back to the driver (its content
kept in host memory) while tensors keep their addresses, and ``wake()`` brings it back; allocator
objects have the same methods (docs/torch.md).

Only the standard library is needed to import this package, to check a configuration
(:func:`check_config`, :func:`describe`) and to list the strategies (:func:`strategies`);
:func:`enable` and :func:`allocator` need PyTorch.
"""

from __future__ import annotations

import collections
import copy
import ctypes
import os
import threading
from typing import Any, Dict, List, Optional

from . import _driver, _frames, _library, _output, _warnings
from ._output import OutputFileError
from ._allocator import Allocator, allocator, describe, place, set_thread_placement, thread_placement
from ._library import library_path
from ._doctor_api import doctor
from ._driver import DriverUnsupportedError, driver_info
from ._observer import diagnose_ooms, last_oom_diagnosis
from ._oom import last_oom_report
from ._sleep import InvalidStateError, NotEnabledError, OutOfMemoryError, backup_pool_bytes, current_tag, region, reserve_backup, sleep, tag_stats, trim_backup, wake
from ._stats import device_index as _device_index
from ._stats import instance_memory_stats, instance_raw_stats

__version__ = "0.1.0"

__all__ = [
    "Allocator",
    "allocator",
    "describe",
    "place",
    "set_thread_placement",
    "thread_placement",
    "library_path",
    "check_config",
    "strategies",
    "enable",
    "is_enabled",
    "config",
    "last_error",
    "format_oom_message",
    "last_oom_report",
    "doctor",
    "diagnose_ooms",
    "last_oom_diagnosis",
    "memory_stats",
    "raw_stats",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "reset_peak_stats",
    "empty_cache",
    "record",
    "OutputFileError",
    "stop",
    "is_recording",
    "region",
    "current_tag",
    "sleep",
    "wake",
    "tag_stats",
    "backup_pool_bytes",
    "trim_backup",
    "reserve_backup",
    "OutOfMemoryError",
    "InvalidStateError",
    "NotEnabledError",
    "DriverUnsupportedError",
    "driver_info",
]

def __getattr__(name: str) -> Any:
    # STRATEGIES: the names GPUMEM_ALLOCATOR takes, in the registry's order, read from the library
    # on first use (importing this package does not load it).
    if name == "STRATEGIES":
        return _library.registry().names
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_lock = threading.Lock()
_init_env: Optional[Dict[str, Optional[str]]] = None  # the environment the library kept
_enabled = False
_allocator = None  # keeps the CUDAPluggableAllocator alive


def _apply_env(strategy: Optional[str], options: Dict[str, Any]) -> Dict[str, Optional[str]]:
    """Sets the variables of ``strategy`` and ``options``; returns their previous values (to undo
    a configuration the library rejected)."""
    updates = _library.option_values(strategy, options)
    if _init_env is not None:
        changed = [k for k, v in updates.items() if _init_env.get(k) != v]
        if changed:
            raise RuntimeError(
                "gpumem: the library already read its configuration "
                f"({config()}); {', '.join(changed)} cannot change in this process"
            )
        return {}
    previous = {k: os.environ.get(k) for k in updates}
    os.environ.update(updates)
    return previous


def _restore_env(previous: Dict[str, Optional[str]]) -> None:
    for key, value in previous.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _init(previous: Dict[str, Optional[str]]) -> str:
    """Has the library read the environment. It keeps the first valid configuration; a bad one is
    rejected (ValueError), the variables set for it are put back, and nothing is kept, so that
    another configuration can still be chosen. The first time here, the library may have kept one
    already (config() or a C caller's first allocation read the environment before): where the
    environment now describes another, RuntimeError, the variables put back, since the library never
    reads it again and the new one would be ignored in silence."""
    global _init_env
    lib = _library.load()
    with _warnings.collected():  # deprecated spellings the library read: FutureWarning, at the caller's line
        rc = lib.gpumem_init()
        if rc != 0:
            message = _library.last_error()
            _restore_env(previous)
            if rc == _driver.ERR_DRIVER:
                raise _driver.unsupported(message)
            raise ValueError(message)
        kept = lib.gpumem_config().decode()
        if _init_env is None:
            spec = "".join(f"{name}={os.environ[name]}\n" for name in _env_names() if os.environ.get(name))
            described = lib.gpumem_describe_config(spec.encode())
            if described is None:
                message = _library.last_error()
                _restore_env(previous)
                raise ValueError(message)
            if described.decode() != kept:
                _restore_env(previous)
                raise RuntimeError(
                    f"gpumem: the library already read its configuration ({kept}); the environment's "
                    f"({described.decode()}) cannot take effect in this process"
                )
            _init_env = {k: (os.environ.get(k) or None) for k in _library.registry().variables}
    return kept


def _env_names() -> List[str]:
    """Every variable the library reads: the registry's, and their deprecated spellings."""
    names = list(_library.registry().variables)
    for strategy in _library.registry().strategies:
        for option in strategy["options"]:
            names += [alias for alias in option.get("envAliases") or [] if alias not in names]
    return names


def check_config(strategy: Optional[str] = None, **options: Any) -> str:
    """Sets the given options as environment variables, loads the library and validates the
    configuration, without PyTorch and without touching CUDA. Returns the configuration string
    (as :func:`config`); raises ValueError with the library's message (naming the variable, the
    value and the accepted form) for a bad value, and then leaves the environment as it was.

    The library keeps the first valid configuration of the process (PyTorch's allocator cannot
    change once used): after a successful call, options that would change it raise RuntimeError.
    A rejected configuration is not kept. To validate without keeping anything, use
    :func:`describe`."""
    with _lock:
        previous = _apply_env(strategy, options)
        return _init(previous)


def strategies(all_registered: bool = False) -> List[Dict[str, Any]]:
    """The strategies of the library's registry, as the core describes them: each a dict with
    ``name``, ``aliases`` (its older names, deprecated), ``description``, ``layer`` (``leaf``,
    ``cache`` or ``adaptor``), ``wraps``, ``flags``
    (``requiresCuda``, ``capturable``, ``hostMemory``, ``requiresOptions``, ``managedMemory``,
    ``spillsToHost``, ``peerAccess``, ``hostDevice``, ``kernelMemory``, ``sleep``: :func:`sleep` and
    :func:`wake` by tag) and ``options`` (each with
    ``key``, ``kind``, ``minimum``, ``choices``, ``default``, ``help``, ``js`` (the Node spec takes
    it), ``env`` (the variable that sets it here, None where none does), ``envAliases`` (its
    deprecated spellings) and ``required``). The keywords of :func:`enable` and :func:`allocator`
    are these variables' names.

    By default only those ``GPUMEM_ALLOCATOR`` accepts (``kernelMemory``: CUDA kernels can use
    their memory); ``all_registered=True`` lists every registered strategy. Needs neither PyTorch nor a GPU,
    and reads no configuration."""
    listed = _library.registry().strategies
    return [copy.deepcopy(s) for s in listed if all_registered or s["flags"]["kernelMemory"]]


def enable(strategy: Optional[str] = None, **options: Any) -> str:
    """Makes gpumem PyTorch's CUDA allocator for the whole process. Call it before anything
    initialises CUDA.

    ``strategy`` is one of ``cuda``, ``uvm``, ``pool``, ``async``, ``plugin`` (with
    ``plugin_library``), ``expandable``, ``pinned``, ``tiered``, ``caching`` (:data:`STRATEGIES`,
    :func:`strategies`)
    (default: ``$GPUMEM_ALLOCATOR``, else ``expandable``); ``native`` (the older name of ``plugin``)
    and ``plugin:/path/lib.so`` are deprecated spellings. ``options`` set the matching environment
    variables, each keyword the variable's name in lower case without ``GPUMEM_``, or without the
    strategy's name as well where that is unambiguous (``pool_max_reserved`` or ``max_reserved``):
    ``uvm_prefetch`` (bool), ``uvm_advise`` (``none``/``device``/``host``),
    ``uvm_limit`` (``free``, ``none`` or a size), ``async_release_threshold`` (size),
    ``pool_max_reserved`` (size; also pinned's cap), ``tiered_device_budget`` and
    ``tiered_host_budget`` (sizes), ``tiered_placement`` (``auto``/``device``/``host``),
    ``expandable_unmap_idle_before_growth`` (bool),
    ``plugin_library`` (path; ``native_library`` is its deprecated name), ``plugin_options``
    (``"key=value;key=value"``), ``oom`` (``raise``/``null``). Sizes are integers (bytes) or strings such as ``"512MiB"`` or ``"4GiB"``
    (KiB, MiB, GiB or TiB, the only units accepted: ``"4GB"`` is refused, the message suggesting
    ``"4GiB"``); with a unit, a fraction such as ``"16.5GiB"`` or ``"0.5 GiB"``, rounded down to whole
    bytes (the library parses them, as it parses its environment). ``None`` leaves a variable as it is; a value holding a NUL character is refused
    (ValueError naming the keyword and its variable).

    Deprecated spellings the library reads from the environment (``GPUMEM_ALLOCATOR=native``, ...)
    are FutureWarnings, its other warnings RuntimeWarnings, through the ``warnings`` module.

    Returns the configuration string. Raises ValueError for a bad configuration (nothing is
    changed in PyTorch or in the environment), DriverUnsupportedError (a RuntimeError) when the
    NVIDIA driver is older than the strategy needs (it names the strategy, the entry point or
    feature, the CUDA version that brought it and the driver's version; see :func:`driver_info`),
    RuntimeError when CUDA is already initialised or
    another allocator is in place, FileNotFoundError when the library is missing, ImportError
    without PyTorch. Calling it again with the same (or no) options is a no-op."""
    global _enabled, _allocator
    if not _enabled:
        # A bad name or option is the error, with or without PyTorch installed (ValueError,
        # TypeError), before the import that would hide it behind ImportError.
        _check_request(strategy, options)
    import torch  # noqa: F401  (ImportError is the clear message here)

    with _lock:
        if _enabled:
            _apply_env(strategy, options)  # raises if the options would change
            return config()
        if torch.cuda.is_initialized():
            raise RuntimeError(
                "gpumem: enable() must be called before CUDA is initialised in this process "
                "(PyTorch cannot swap an allocator that has already allocated). Call it first thing, "
                "before creating CUDA tensors or calling torch.cuda functions that touch the device"
            )
        previous = _apply_env(strategy, options)
        description = _init(previous)
        try:
            allocator = torch.cuda.memory.CUDAPluggableAllocator(_library.loaded_path(), "gpumem_malloc", "gpumem_free")
            torch.cuda.memory.change_current_allocator(allocator)
        except RuntimeError as e:
            raise RuntimeError(f"gpumem: PyTorch refused the allocator: {e}") from e
        _allocator = allocator
        _enabled = True
        return description


def _check_request(strategy: Optional[str], options: Dict[str, Any]) -> None:
    """ValueError or TypeError for a strategy or options the library would refuse, checked by the
    library's describe (nothing created, the environment untouched). A strategy left None is the
    environment's, which enable() checks when the library reads it."""
    if strategy is None and not options:
        return
    name = strategy if strategy is not None else (os.environ.get("GPUMEM_ALLOCATOR") or "expandable")
    describe(name, **options)


def is_enabled() -> bool:
    """Whether :func:`enable` made gpumem PyTorch's allocator in this process."""
    return _enabled


def config() -> str:
    """The strategy and options in effect for :func:`enable` (the environment's configuration),
    e.g. ``strategy=pool pool.upstream=cuda pool.max_reserved=none oom=raise``; reads the
    environment if nothing did yet; ``error: ...`` when it is not valid."""
    lib = _library.load()
    with _warnings.collected():
        # The library keeps what it read here: check_config() and enable() compare what they are
        # asked for with it (_init), rather than report it as the new configuration.
        return lib.gpumem_config().decode()


def last_error() -> str:
    """The library's last error message on this thread, e.g. why an allocation failed (after a
    ``torch.OutOfMemoryError`` raised inside a MemPool: gpumem's "CUDA out of memory. gpumem: ..."
    detail)."""
    return _library.last_error()


def format_oom_message(
    strategy: str,
    request_bytes: int,
    device: int = 0,
    cause: str = "",
    stats: Optional[Dict[str, int]] = None,
) -> str:
    """The out-of-memory message the library raises, as it formats it (C++), for ``stats`` (a
    :func:`raw_stats` dict; None: nothing reserved yet). For tests and for tools that match it."""
    lib = _library.load()
    s = None
    if stats is not None:
        defaults = {"largest_free_block": -1, "host_allocated_bytes": -1, "peak_host_allocated_bytes": -1, "host_reserved_bytes": -1}
        s = _library.Stats(**{name: int(stats.get(name, defaults.get(name, 0))) for name, _ in _library.Stats._fields_})
    size = lib.gpumem_format_oom(strategy.encode(), request_bytes, device, cause.encode(), s, None, 0)
    buffer = ctypes.create_string_buffer(size + 1)
    lib.gpumem_format_oom(strategy.encode(), request_bytes, device, cause.encode(), s, buffer, size + 1)
    return buffer.value.decode("utf-8", "replace")


def raw_stats(device: Any = None) -> Dict[str, int]:
    """The library's counters for ``device`` as a dict of the C struct's field names
    (``allocated_bytes``, ``peak_allocated_bytes``, ...; see gpumem_torch.h), for the allocator
    :func:`enable` installs (an :class:`Allocator` has its own)."""
    return instance_raw_stats(0, device)


def memory_stats(device: Any = None) -> "collections.OrderedDict[str, int]":
    """gpumem's statistics for ``device``, keyed like ``torch.cuda.memory_stats()`` where the
    meaning is the same, plus ``gpumem.``-prefixed keys for the rest. Sorted by key.

    PyTorch keys:
      ``allocated_bytes.all.current`` / ``.peak``: bytes held by tensors (and PyTorch's own
        device buffers such as cuBLAS workspaces) now / at the high-water mark. The sizes are
        the ones PyTorch asked for, i.e. the storages' ``nbytes()``, not rounded block sizes
        (PyTorch's ``allocated_bytes`` counts its rounded blocks; gpumem knows only the sizes
        asked for, so ``requested_bytes.*`` is left out rather than repeating these, which would
        show no rounding where strategies do round). Inside a MemPool the "tensors" are
        PyTorch's segments.
      ``reserved_bytes.all.current`` / ``.peak``: bytes the strategy holds from the driver
        (pool segments; the async pool's reserve; tiered: physical bytes on both tiers; equal
        to allocated for cuda and uvm).
      ``allocation.all.current`` / ``.allocated`` / ``.freed``: live allocations; cumulative
        allocations and frees.
      ``segment.all.current``: driver allocations held (pool segments; cuda/uvm: one per
        allocation; absent for async, whose segments the driver manages).
      ``num_device_alloc`` / ``num_device_free``: driver allocation / free calls.
      ``num_ooms``: allocations that failed for lack of memory.
    Left out, since the library does not know them: ``*.allocated`` / ``*.freed`` of the byte
      counts, ``*.peak`` of the counts, the ``large_pool`` / ``small_pool`` splits,
      ``requested_bytes.*`` (above), ``active.*`` / ``active_bytes.*`` (blocks freed but still in
      use by a stream are not counted apart from free ones), ``inactive_split.*`` /
      ``inactive_split_bytes.*`` (only the largest free block is known), ``num_alloc_retries``
      (the pool's release-and-retry is not counted), ``num_sync_all_streams``,
      ``oversize_allocations.*``, ``oversize_segments.*``, ``max_split_size``. Code that reads
      them should use ``.get()``.
    gpumem keys: ``gpumem.active`` (1 once the device's strategy exists),
      ``gpumem.host_allocated_bytes.current`` / ``.peak`` and ``gpumem.host_reserved_bytes.current``
      (tiered only: the host tier's part),
      ``gpumem.largest_free_block`` (pool; -1 elsewhere), ``gpumem.zero_size_allocs``,
      ``gpumem.alloc_errors``, ``gpumem.bad_frees``, ``gpumem.size_fixups``.
    """
    return instance_memory_stats(0, device)


def memory_allocated(device: Any = None) -> int:
    """Bytes allocated now (``torch.cuda.memory_allocated``'s counterpart)."""
    return raw_stats(device)["allocated_bytes"]


def max_memory_allocated(device: Any = None) -> int:
    """Peak bytes allocated since start or :func:`reset_peak_memory_stats`."""
    return raw_stats(device)["peak_allocated_bytes"]


def memory_reserved(device: Any = None) -> int:
    """Bytes the strategy holds from the driver now."""
    return raw_stats(device)["reserved_bytes"]


def max_memory_reserved(device: Any = None) -> int:
    """Peak bytes held from the driver since start or :func:`reset_peak_memory_stats`."""
    return raw_stats(device)["peak_reserved_bytes"]


def reset_peak_memory_stats(device: Any = None) -> None:
    """Sets the allocated and reserved peaks to the current values (``torch.cuda.reset_peak_memory_stats``'s
    counterpart)."""
    lib = _library.load()
    if lib.gpumem_reset_peak(_device_index(device)) != 0:
        raise RuntimeError(_library.last_error())


# The older name, kept as an alias without a warning: it is not wrong, only not torch's (the seed
# ABI's uvm_reset_peak_stats says the same), so code written against it need not change.
reset_peak_stats = reset_peak_memory_stats


def empty_cache(device: Any = None) -> None:
    """Gives cached memory back to the driver (``torch.cuda.empty_cache`` does nothing with a
    pluggable allocator): the pool releases its free segments; async synchronises the device and
    trims its pool to 0; tiered releases its cached blocks; cuda and uvm cache nothing."""
    lib = _library.load()
    if lib.gpumem_trim(_device_index(device)) != 0:
        raise RuntimeError(_library.last_error())


def _trace_lib() -> ctypes.CDLL:
    lib = _library.load()
    if not hasattr(lib, "gpumem_trace_start"):
        raise RuntimeError(f"gpumem: {_library.loaded_path()} has no trace functions; rebuild it")
    lib.gpumem_trace_start.restype = ctypes.c_int
    lib.gpumem_trace_start.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.gpumem_trace_stop.restype = ctypes.c_int
    lib.gpumem_trace_stop.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
    lib.gpumem_trace_active.restype = ctypes.c_int
    lib.gpumem_trace_active.argtypes = []
    lib.gpumem_trace_path.restype = ctypes.c_char_p
    lib.gpumem_trace_path.argtypes = []
    return lib


def record(
    path: "os.PathLike[str] | str", workload: Optional[Dict[str, Any]] = None, frames: "bool | int" = False
) -> str:
    """Starts recording every allocation, free and out-of-memory failure of the library to
    ``path`` until :func:`stop` (or the end of the process). A ``path`` ending in ``.csv`` gets
    RMM's logging CSV, anything else gpumem's JSONL trace; ``gpumem replay`` reads both.
    ``workload`` (a JSON-serialisable dict) goes into the JSONL header.

    ``frames=True`` (JSONL only) tags each allocation with its innermost user Python frame
    (``file:line:function``; frames of PyTorch, the Python runtime and this package skipped), and
    the header names the 12 frames that allocated the most bytes (``frames=N``: N of them, up to
    64), the rest "other": ``gpumem replay`` stacks its report by frame, as for a PyTorch snapshot
    recorded with stacks. It costs a Python call per allocation (0.4 to 2 µs on a development
    CPU, more the deeper PyTorch's frames: docs/torch.md); a MemPool's segments, which PyTorch
    asks for under its own lock, are "other". Raises ValueError for a ``.csv`` path.

    Works with or without :func:`enable` (the library records whatever calls it, PyTorch or C).
    Allocations made before the call are not in the trace: their frees are (replay skips them).
    The trace is written into a temporary file beside ``path`` and renamed over it at :func:`stop`:
    a failed write leaves ``path`` as it was, a hard link's other names keep their bytes, a
    replaced file keeps its mode. A process killed before :func:`stop` leaves what it recorded in
    that temporary file (``.NAME.PID-N.tmp``), which ``gpumem replay`` reads.

    Returns the absolute path. Raises :class:`OutputFileError` (a ValueError and an OSError) for a
    name with a NUL byte, a device, FIFO, socket or folder, a missing folder, or the library itself;
    RuntimeError when a trace is already being recorded (``GPUMEM_TRACE`` included) or the file
    cannot be created."""
    import json

    given = _output.check_path(path)
    _output.output_target(given)  # a device, FIFO or folder is refused here, before the library is asked
    target = os.path.abspath(given)
    payload = None if workload is None else json.dumps(workload, sort_keys=True).encode()
    named = 0 if frames is False else _frames.check_named_frames(frames)
    if named and target.lower().endswith(".csv"):
        raise ValueError(f"gpumem: frames are recorded in gpumem's JSONL trace only; RMM's CSV has no tags (path {target!r})")
    with _lock, _warnings.collected():  # GPUMEM_TRACE that could not start: RuntimeWarning
        lib = _trace_lib()
        for library in (_library.loaded_path(), os.environ.get("GPUMEM_PLUGIN_LIBRARY")):
            if library and _output.same_file(target, library):
                raise OutputFileError(given, f"is the library {library} in use: writing it would overwrite it; give another file")
        if named == 0:
            rc = lib.gpumem_trace_start(target.encode(), payload)
        else:
            if not hasattr(lib, "gpumem_trace_start_frames"):
                raise RuntimeError(f"gpumem: {_library.loaded_path()} cannot record Python frames; rebuild it")
            lib.gpumem_trace_start_frames.restype = ctypes.c_int
            lib.gpumem_trace_start_frames.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32]
            _frames.install(lib, _library.loaded_path())
            rc = lib.gpumem_trace_start_frames(target.encode(), payload, named)
    if rc != 0:
        raise RuntimeError(lib.gpumem_last_error().decode("utf-8", "replace"))
    return target


def stop() -> Dict[str, Any]:
    """Writes what is buffered, completes the trace file and closes it (also for a trace started
    by ``GPUMEM_TRACE``). Returns ``{"path": ..., "events": N, "format": "jsonl" | "rmm-csv"}``.
    Raises RuntimeError when nothing is being recorded or writing the file failed."""
    events = ctypes.c_uint64(0)
    with _lock:
        lib = _trace_lib()
        path = lib.gpumem_trace_path().decode("utf-8", "replace")
        rc = lib.gpumem_trace_stop(ctypes.byref(events))
    if rc != 0:
        raise RuntimeError(lib.gpumem_last_error().decode("utf-8", "replace"))
    return {"path": path, "events": int(events.value), "format": "rmm-csv" if path.lower().endswith(".csv") else "jsonl"}


def is_recording() -> bool:
    """Whether the library is recording a trace now (by :func:`record` or ``GPUMEM_TRACE``)."""
    lib = _trace_lib()
    with _warnings.collected():  # GPUMEM_TRACE that could not start: RuntimeWarning
        return bool(lib.gpumem_trace_active())
