"""Finding and loading libgpumem_torch.so, and the option names shared by enable() and allocator().

Only the standard library: this module is imported where PyTorch is not installed."""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Any, List, Optional, Tuple

LIBRARY_NAME = "libgpumem_torch.so"
ABI_VERSION = 2

# The core's strategies that run under PyTorch, by the names of gpumem's registry, in its order:
# every registered strategy whose memory CUDA kernels can use (strategies() reads them from the
# library; a test keeps this tuple equal to it). 'native' is a plug-in library
# (GPUMEM_NATIVE_LIBRARY); 'plugin:PATH' is its older spelling, deprecated.
STRATEGIES = ("cuda", "uvm", "pool", "async", "native", "expandable", "pinned", "tiered")

# Keyword option -> environment variable (the library's configuration names).
OPTION_ENV = {
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
    "native_library": "GPUMEM_NATIVE_LIBRARY",
    "library": "GPUMEM_NATIVE_LIBRARY",
    "plugin_options": "GPUMEM_PLUGIN_OPTIONS",
    "tiered_device_budget": "GPUMEM_TIERED_DEVICE_BUDGET",
    "device_budget": "GPUMEM_TIERED_DEVICE_BUDGET",
    "tiered_host_budget": "GPUMEM_TIERED_HOST_BUDGET",
    "host_budget": "GPUMEM_TIERED_HOST_BUDGET",
    "tiered_placement": "GPUMEM_TIERED_PLACEMENT",
    "placement": "GPUMEM_TIERED_PLACEMENT",
    "expandable_unmap_idle_before_growth": "GPUMEM_EXPANDABLE_UNMAP_IDLE_BEFORE_GROWTH",
    "unmap_idle_before_growth": "GPUMEM_EXPANDABLE_UNMAP_IDLE_BEFORE_GROWTH",
}
CONFIG_ENV = ("GPUMEM_ALLOCATOR",) + tuple(sorted(set(OPTION_ENV.values())))


class Stats(ctypes.Structure):
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
        ("host_allocated_bytes", ctypes.c_int64),
        ("peak_host_allocated_bytes", ctypes.c_int64),
        ("host_reserved_bytes", ctypes.c_int64),
        ("active", ctypes.c_int32),
        ("device", ctypes.c_int32),
    ]


_load_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None


def library_candidates() -> List[Tuple[str, str]]:
    """Where the library is looked for, in order, as (path, where it comes from)."""
    env = os.environ.get("GPUMEM_TORCH_LIB")
    if env:  # an explicit choice is the only one
        return [(str(Path(env).expanduser().resolve()), "$GPUMEM_TORCH_LIB")]
    here = Path(__file__).resolve().parent
    repo = here.parents[2]
    return [
        (str(here / "lib" / LIBRARY_NAME), "the installed package"),
        (str(repo / "native" / "build" / "Release" / LIBRARY_NAME), "the repository's native build"),
    ]


def library_path() -> str:
    """The path of ``libgpumem_torch.so`` to load: ``$GPUMEM_TORCH_LIB`` if set; else the copy
    inside the installed package (``gpumem_torch/lib/``); else, in a checkout of the repository,
    ``native/build/Release/libgpumem_torch.so``. The first that exists (the first candidate when
    none does)."""
    candidates = library_candidates()
    for path, _ in candidates:
        if os.path.exists(path):
            return path
    return candidates[0][0]


def _declare(lib: ctypes.CDLL) -> None:
    c_int, c_char_p, c_size_t, c_uint64 = ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64
    signatures = {
        "gpumem_init": (c_int, []),
        "gpumem_last_error": (c_char_p, []),
        "gpumem_config": (c_char_p, []),
        "gpumem_stats": (c_int, [c_int, ctypes.POINTER(Stats)]),
        "gpumem_stats_size": (c_size_t, []),
        "gpumem_reset_peak": (c_int, [c_int]),
        "gpumem_trim": (c_int, [c_int]),
        "gpumem_abi_version": (c_int, []),
        "gpumem_instance_create": (c_int, [c_char_p]),
        "gpumem_describe_config": (c_char_p, [c_char_p]),
        "gpumem_instance_config": (c_char_p, [c_int]),
        "gpumem_instance_stats": (c_int, [c_int, c_int, ctypes.POINTER(Stats)]),
        "gpumem_instance_reset_peak": (c_int, [c_int, c_int]),
        "gpumem_instance_trim": (c_int, [c_int, c_int]),
        "gpumem_set_thread_placement": (c_int, [c_int, ctypes.POINTER(c_int)]),
        "gpumem_thread_placement": (c_int, []),
        "gpumem_format_oom": (
            c_size_t,
            [c_char_p, c_uint64, c_int, c_char_p, ctypes.POINTER(Stats), ctypes.c_char_p, c_size_t],
        ),
    }
    # Newer than the interface version: declared where the library has it.
    optional = {"gpumem_strategies": (c_char_p, [])}
    signatures.update({name: sig for name, sig in optional.items() if hasattr(lib, name)})
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def load() -> ctypes.CDLL:
    """The loaded library (loaded once). FileNotFoundError naming every place looked at when it is
    missing; RuntimeError when it is of another interface version."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _load_lock:
        if _lib is not None:
            return _lib
        path = library_path()
        if not os.path.exists(path):
            looked = "; ".join(f"{p} ({why})" for p, why in library_candidates())
            raise FileNotFoundError(
                f"gpumem: libgpumem_torch.so not found. Looked at: {looked}. Install the gpumem-torch wheel "
                "(pip wheel --no-deps --no-build-isolation bindings/python, which needs the CUDA toolkit), build "
                "the repository's native/ folder, or point GPUMEM_TORCH_LIB at a built libgpumem_torch.so"
            )
        lib = ctypes.CDLL(path)
        version = lib.gpumem_abi_version() if hasattr(lib, "gpumem_abi_version") else None
        lib.gpumem_stats_size.restype = ctypes.c_size_t
        if version != ABI_VERSION or lib.gpumem_stats_size() != ctypes.sizeof(Stats):
            raise RuntimeError(
                f"gpumem: {path} has interface version {version} (stats struct {lib.gpumem_stats_size()} bytes); "
                f"this module expects version {ABI_VERSION} ({ctypes.sizeof(Stats)} bytes). Rebuild the library "
                "or use the gpumem_torch package built with it"
            )
        _declare(lib)
        _lib, _lib_path = lib, path
        return lib


def loaded_path() -> Optional[str]:
    """The path of the loaded library, None before load()."""
    return _lib_path


def last_error() -> str:
    return load().gpumem_last_error().decode("utf-8", "replace")


def env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, str)):
        return str(value)
    raise TypeError(f"gpumem: expected an int, a bool or a string for an option but received {value!r} of type {type(value).__name__}")


def option_values(strategy: Optional[str], options: dict) -> dict:
    """{variable: value} for a strategy and keyword options; TypeError for an unknown option or a
    strategy that is not a string."""
    values = {}
    if strategy is not None:
        if not isinstance(strategy, str):
            raise TypeError(f"gpumem: expected a strategy name (str) but received {strategy!r} of type {type(strategy).__name__}")
        values["GPUMEM_ALLOCATOR"] = strategy
    for key, value in options.items():
        if key not in OPTION_ENV:
            known = ", ".join(sorted(OPTION_ENV))
            raise TypeError(f"gpumem: unknown option {key!r}; known options: {known}")
        if value is not None:
            values[OPTION_ENV[key]] = env_value(value)
    return values
