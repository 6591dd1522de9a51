"""gpumem's allocation strategies inside PyTorch, with memory statistics.

PyTorch lets a shared library replace its CUDA caching allocator
(``torch.cuda.memory.CUDAPluggableAllocator``), but a pluggable allocator loses PyTorch's memory
statistics: ``torch.cuda.memory_stats()`` raises (pytorch/pytorch#133281). This module loads
``libgpumem_torch.so`` (gpumem's strategies behind PyTorch's ``gpumem_malloc`` / ``gpumem_free``
interface), makes it PyTorch's allocator and reads the statistics the library keeps itself::

    import gpumem_torch
    gpumem_torch.enable("pool")           # before anything touches CUDA
    import torch
    x = torch.randn(1024, 1024, device="cuda")
    gpumem_torch.memory_stats()["allocated_bytes.all.current"]   # 4194304

Strategies (``GPUMEM_ALLOCATOR``): ``cuda`` (cudaMalloc/cudaFree per tensor), ``uvm``
(cudaMallocManaged, prefetched to the device, capped at the device's free memory), ``pool``
(gpumem's caching block pool over cudaMalloc; the default) and ``async`` (cudaMallocAsync on a
pool of the library's own). Options are environment variables read once by the library; see
``docs/torch.md`` and ``native/src/torch/gpumem_torch.h``.

The library is found at ``$GPUMEM_TORCH_LIB`` or, by default,
``native/build/Release/libgpumem_torch.so`` in this repository (built by
``cd native && npx cmake-js compile --out build``).

Allocation traces: ``record(path)`` ... ``stop()`` writes every allocation and free the library
serves in between to ``path`` (gpumem's JSONL trace, or RMM's CSV for a ``.csv`` path), for
``gpumem replay``; ``GPUMEM_TRACE=path`` records the whole process instead (docs/torch.md).

Only the standard library is needed to import this module and to check a configuration
(:func:`check_config`); :func:`enable` needs PyTorch.
"""

from __future__ import annotations

import collections
import ctypes
import os
import threading
from pathlib import Path
from typing import Any, Dict, Optional

__all__ = [
    "STRATEGIES",
    "library_path",
    "check_config",
    "enable",
    "is_enabled",
    "config",
    "last_error",
    "memory_stats",
    "raw_stats",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_stats",
    "empty_cache",
    "record",
    "stop",
    "is_recording",
]

STRATEGIES = ("cuda", "uvm", "pool", "async", "expandable")

# enable(**options) keyword -> environment variable.
_OPTION_ENV = {
    "uvm_prefetch": "GPUMEM_UVM_PREFETCH",
    "prefetch": "GPUMEM_UVM_PREFETCH",
    "uvm_advise": "GPUMEM_UVM_ADVISE",
    "advise": "GPUMEM_UVM_ADVISE",
    "uvm_limit": "GPUMEM_UVM_LIMIT",
    "async_release_threshold": "GPUMEM_ASYNC_RELEASE_THRESHOLD",
    "release_threshold": "GPUMEM_ASYNC_RELEASE_THRESHOLD",
    "pool_max_reserved": "GPUMEM_POOL_MAX_RESERVED",
    "max_reserved": "GPUMEM_POOL_MAX_RESERVED",
    "oom": "GPUMEM_OOM",
    "plugin_options": "GPUMEM_PLUGIN_OPTIONS",
}
_CONFIG_ENV = ("GPUMEM_ALLOCATOR",) + tuple(sorted(set(_OPTION_ENV.values())))

_ABI_VERSION = 1


class _Stats(ctypes.Structure):
    """Mirror of ``gpumem_torch_stats`` (native/src/torch/gpumem_torch.h)."""

    _fields_ = [
        ("allocated_bytes", ctypes.c_uint64),
        ("peak_allocated_bytes", ctypes.c_uint64),
        ("reserved_bytes", ctypes.c_uint64),
        ("peak_reserved_bytes", ctypes.c_uint64),
        ("alloc_count", ctypes.c_uint64),
        ("free_count", ctypes.c_uint64),
        ("upstream_alloc_count", ctypes.c_uint64),
        ("upstream_free_count", ctypes.c_uint64),
        ("oom_count", ctypes.c_uint64),
        ("largest_free_block", ctypes.c_int64),
        ("segment_count", ctypes.c_uint64),
        ("zero_size_count", ctypes.c_uint64),
        ("error_count", ctypes.c_uint64),
        ("bad_free_count", ctypes.c_uint64),
        ("size_fixup_count", ctypes.c_uint64),
        ("active", ctypes.c_int32),
        ("device", ctypes.c_int32),
    ]


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None
_init_env: Optional[Dict[str, Optional[str]]] = None
_enabled = False
_allocator = None  # keeps the CUDAPluggableAllocator alive


def library_path() -> str:
    """The path of ``libgpumem_torch.so`` this module loads: ``$GPUMEM_TORCH_LIB`` if set, else
    ``native/build/Release/libgpumem_torch.so`` relative to the repository root."""
    env = os.environ.get("GPUMEM_TORCH_LIB")
    if env:
        return str(Path(env).expanduser().resolve())
    root = Path(__file__).resolve().parents[2]
    return str(root / "native" / "build" / "Release" / "libgpumem_torch.so")


def _load() -> ctypes.CDLL:
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    path = library_path()
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"gpumem: {path} does not exist. Build it with `cd native && npx cmake-js compile --out build` "
            "(it needs the CUDA toolkit) or point GPUMEM_TORCH_LIB at a built libgpumem_torch.so"
        )
    lib = ctypes.CDLL(path)
    lib.gpumem_init.restype = ctypes.c_int
    lib.gpumem_init.argtypes = []
    lib.gpumem_last_error.restype = ctypes.c_char_p
    lib.gpumem_last_error.argtypes = []
    lib.gpumem_config.restype = ctypes.c_char_p
    lib.gpumem_config.argtypes = []
    lib.gpumem_stats.restype = ctypes.c_int
    lib.gpumem_stats.argtypes = [ctypes.c_int, ctypes.POINTER(_Stats)]
    lib.gpumem_stats_size.restype = ctypes.c_size_t
    lib.gpumem_stats_size.argtypes = []
    lib.gpumem_reset_peak.restype = ctypes.c_int
    lib.gpumem_reset_peak.argtypes = [ctypes.c_int]
    lib.gpumem_trim.restype = ctypes.c_int
    lib.gpumem_trim.argtypes = [ctypes.c_int]
    lib.gpumem_abi_version.restype = ctypes.c_int
    lib.gpumem_abi_version.argtypes = []
    if lib.gpumem_abi_version() != _ABI_VERSION or lib.gpumem_stats_size() != ctypes.sizeof(_Stats):
        raise RuntimeError(
            f"gpumem: {path} has interface version {lib.gpumem_abi_version()} "
            f"(stats struct {lib.gpumem_stats_size()} bytes); this module expects version {_ABI_VERSION} "
            f"({ctypes.sizeof(_Stats)} bytes). Rebuild the library or use the matching gpumem_torch.py"
        )
    _lib, _lib_path = lib, path
    return lib


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _apply_env(strategy: Optional[str], options: Dict[str, Any]) -> None:
    updates = {}
    if strategy is not None:
        updates["GPUMEM_ALLOCATOR"] = _env_value(strategy)
    for key, value in options.items():
        if key not in _OPTION_ENV:
            known = ", ".join(sorted(_OPTION_ENV))
            raise TypeError(f"gpumem: unknown option {key!r}; known options: {known}")
        if value is not None:
            updates[_OPTION_ENV[key]] = _env_value(value)
    if _init_env is not None:
        changed = [k for k, v in updates.items() if _init_env.get(k) != v]
        if changed:
            raise RuntimeError(
                "gpumem: the library already read its configuration "
                f"({config()}); {', '.join(changed)} cannot change in this process"
            )
        return
    os.environ.update(updates)


def _init() -> str:
    """Loads the library and has it read the environment (once per process)."""
    global _init_env
    lib = _load()
    rc = lib.gpumem_init()
    if _init_env is None:
        _init_env = {k: (os.environ.get(k) or None) for k in _CONFIG_ENV}
    if rc != 0:
        raise ValueError(lib.gpumem_last_error().decode("utf-8", "replace"))
    return lib.gpumem_config().decode()


def check_config(strategy: Optional[str] = None, **options: Any) -> str:
    """Sets the given options as environment variables, loads the library and validates the
    configuration, without PyTorch and without touching CUDA. Returns the configuration string
    (as :func:`config`); raises ValueError with the library's message (naming the variable, the
    value and the accepted form) for a bad value.

    The library reads the environment once per process: options given after the first call
    that would change it raise RuntimeError."""
    with _lock:
        _apply_env(strategy, options)
        return _init()


def enable(strategy: Optional[str] = None, **options: Any) -> str:
    """Makes gpumem PyTorch's CUDA allocator. Call it before anything initialises CUDA.

    ``strategy`` is one of ``cuda``, ``uvm``, ``pool``, ``async``, or ``plugin:/path/lib.so`` for a
    strategy built as a plug-in library against gpumem/plugin.h (default: ``$GPUMEM_ALLOCATOR``,
    else ``pool``); ``plugin_options`` is the plug-in's ``"key=value;key=value"`` string. ``options`` set the matching environment variables: ``uvm_prefetch``
    (bool), ``uvm_advise`` (``none``/``device``/``host``), ``uvm_limit`` (``free``, ``none`` or a
    size), ``async_release_threshold`` (size), ``pool_max_reserved`` (size), ``oom``
    (``raise``/``null``). Sizes are integers (bytes) or strings such as ``"512MiB"`` or ``"4GiB"`` (KiB, MiB, GiB or
    TiB, the only units accepted).
    ``None`` leaves a variable as it is.

    Returns the configuration string. Raises ValueError for a bad configuration (nothing is
    changed in PyTorch), RuntimeError when CUDA is already initialised or another allocator is in
    place, FileNotFoundError when the library is missing, ImportError without PyTorch.
    Calling it again with the same (or no) options is a no-op."""
    global _enabled, _allocator
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
        _apply_env(strategy, options)
        description = _init()
        try:
            allocator = torch.cuda.memory.CUDAPluggableAllocator(_lib_path, "gpumem_malloc", "gpumem_free")
            torch.cuda.memory.change_current_allocator(allocator)
        except RuntimeError as e:
            raise RuntimeError(f"gpumem: PyTorch refused the allocator: {e}") from e
        _allocator = allocator
        _enabled = True
        return description


def is_enabled() -> bool:
    """Whether :func:`enable` made gpumem PyTorch's allocator in this process."""
    return _enabled


def config() -> str:
    """The strategy and options in effect, e.g. ``strategy=pool pool.upstream=cuda
    pool.max_reserved=none oom=raise`` (reads the environment if nothing did yet)."""
    return _load().gpumem_config().decode()


def last_error() -> str:
    """The library's last error message on this thread (e.g. why an allocation failed)."""
    return _load().gpumem_last_error().decode("utf-8", "replace")


def _device_index(device: Any) -> int:
    if device is None:
        try:
            import torch

            if torch.cuda.is_initialized():
                return torch.cuda.current_device()
        except ImportError:
            pass
        return 0
    if isinstance(device, bool):
        pass
    elif isinstance(device, int):
        return device
    elif isinstance(device, str):
        if device == "cuda":
            return _device_index(None)
        if device.startswith("cuda:") and device[5:].isdigit():
            return int(device[5:])
    elif getattr(device, "type", None) == "cuda":  # torch.device
        return _device_index(None) if device.index is None else int(device.index)
    raise ValueError(f"gpumem: expected a CUDA device (int, 'cuda:N' or torch.device) but received {device!r}")


def raw_stats(device: Any = None) -> Dict[str, int]:
    """The library's counters for ``device`` as a dict of the C struct's field names
    (``allocated_bytes``, ``peak_allocated_bytes``, ...; see gpumem_torch.h)."""
    lib = _load()
    s = _Stats()
    rc = lib.gpumem_stats(_device_index(device), ctypes.byref(s))
    if rc != 0:
        raise ValueError(lib.gpumem_last_error().decode("utf-8", "replace"))
    return {name: int(getattr(s, name)) for name, _ in _Stats._fields_}


def memory_stats(device: Any = None) -> "collections.OrderedDict[str, int]":
    """gpumem's statistics for ``device``, keyed like ``torch.cuda.memory_stats()`` where the
    meaning is the same, plus ``gpumem.``-prefixed keys for the rest. Sorted by key.

    PyTorch keys:
      ``allocated_bytes.all.current`` / ``.peak``: bytes held by tensors (and PyTorch's own
        device buffers such as cuBLAS workspaces) now / at the high-water mark. The sizes are
        the ones PyTorch asked for, i.e. the storages' ``nbytes()``, not rounded block sizes;
        ``requested_bytes.all.*`` repeat them.
      ``reserved_bytes.all.current`` / ``.peak``: bytes the strategy holds from the driver
        (pool segments; the async pool's reserve; equal to allocated for cuda and uvm).
      ``allocation.all.current`` / ``.allocated`` / ``.freed``: live allocations; cumulative
        allocations and frees.
      ``segment.all.current``: driver allocations held (pool segments; cuda/uvm: one per
        allocation; absent for async, whose segments the driver manages).
      ``num_device_alloc`` / ``num_device_free``: driver allocation / free calls.
      ``num_ooms``: allocations that failed for lack of memory.
    gpumem keys: ``gpumem.active`` (1 once the device's strategy exists),
      ``gpumem.largest_free_block`` (pool; -1 elsewhere), ``gpumem.zero_size_allocs``,
      ``gpumem.alloc_errors``, ``gpumem.bad_frees``, ``gpumem.size_fixups``.
    """
    s = raw_stats(device)
    out = {
        "allocated_bytes.all.current": s["allocated_bytes"],
        "allocated_bytes.all.peak": s["peak_allocated_bytes"],
        "requested_bytes.all.current": s["allocated_bytes"],
        "requested_bytes.all.peak": s["peak_allocated_bytes"],
        "reserved_bytes.all.current": s["reserved_bytes"],
        "reserved_bytes.all.peak": s["peak_reserved_bytes"],
        "allocation.all.current": s["alloc_count"] - s["free_count"],
        "allocation.all.allocated": s["alloc_count"],
        "allocation.all.freed": s["free_count"],
        "num_device_alloc": s["upstream_alloc_count"],
        "num_device_free": s["upstream_free_count"],
        "num_ooms": s["oom_count"],
        "gpumem.active": s["active"],
        "gpumem.largest_free_block": s["largest_free_block"],
        "gpumem.zero_size_allocs": s["zero_size_count"],
        "gpumem.alloc_errors": s["error_count"],
        "gpumem.bad_frees": s["bad_free_count"],
        "gpumem.size_fixups": s["size_fixup_count"],
    }
    if not config().startswith("strategy=async"):
        out["segment.all.current"] = s["segment_count"]
    return collections.OrderedDict(sorted(out.items()))


def memory_allocated(device: Any = None) -> int:
    """Bytes allocated now (``torch.cuda.memory_allocated``'s counterpart)."""
    return raw_stats(device)["allocated_bytes"]


def max_memory_allocated(device: Any = None) -> int:
    """Peak bytes allocated since start or :func:`reset_peak_stats`."""
    return raw_stats(device)["peak_allocated_bytes"]


def memory_reserved(device: Any = None) -> int:
    """Bytes the strategy holds from the driver now."""
    return raw_stats(device)["reserved_bytes"]


def max_memory_reserved(device: Any = None) -> int:
    """Peak bytes held from the driver since start or :func:`reset_peak_stats`."""
    return raw_stats(device)["peak_reserved_bytes"]


def reset_peak_stats(device: Any = None) -> None:
    """Sets the allocated and reserved peaks to the current values."""
    lib = _load()
    if lib.gpumem_reset_peak(_device_index(device)) != 0:
        raise RuntimeError(lib.gpumem_last_error().decode("utf-8", "replace"))


def empty_cache(device: Any = None) -> None:
    """Gives cached memory back to the driver (``torch.cuda.empty_cache`` does nothing with a
    pluggable allocator): the pool releases its free segments; async synchronises the device and
    trims its pool to 0; cuda and uvm cache nothing."""
    lib = _load()
    if lib.gpumem_trim(_device_index(device)) != 0:
        raise RuntimeError(lib.gpumem_last_error().decode("utf-8", "replace"))


def _trace_lib() -> ctypes.CDLL:
    lib = _load()
    if not hasattr(lib, "gpumem_trace_start"):
        raise RuntimeError(f"gpumem: {_lib_path} has no trace functions; rebuild it (cd native && npx cmake-js compile --out build)")
    lib.gpumem_trace_start.restype = ctypes.c_int
    lib.gpumem_trace_start.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.gpumem_trace_stop.restype = ctypes.c_int
    lib.gpumem_trace_stop.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
    lib.gpumem_trace_active.restype = ctypes.c_int
    lib.gpumem_trace_active.argtypes = []
    lib.gpumem_trace_path.restype = ctypes.c_char_p
    lib.gpumem_trace_path.argtypes = []
    return lib


def record(path: "os.PathLike[str] | str", workload: Optional[Dict[str, Any]] = None) -> str:
    """Starts recording every allocation, free and out-of-memory failure of the library to
    ``path`` until :func:`stop` (or the end of the process). A ``path`` ending in ``.csv`` gets
    RMM's logging CSV, anything else gpumem's JSONL trace; ``gpumem replay`` reads both.
    ``workload`` (a JSON-serialisable dict) goes into the JSONL header.

    Works with or without :func:`enable` (the library records whatever calls it, PyTorch or C).
    Allocations made before the call are not in the trace: their frees are (replay skips them).
    Returns the absolute path. Raises RuntimeError when a trace is already being recorded
    (``GPUMEM_TRACE`` included) or the file cannot be created."""
    import json

    target = os.path.abspath(os.fspath(path))
    payload = None if workload is None else json.dumps(workload, sort_keys=True).encode()
    with _lock:
        lib = _trace_lib()
        rc = lib.gpumem_trace_start(target.encode(), payload)
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
    return bool(_trace_lib().gpumem_trace_active())
