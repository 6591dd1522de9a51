"""Finding and loading libgpumem_torch.so, and the strategy and option names shared by enable() and
allocator(), read from the library's registry.

Only the standard library: this module is imported where PyTorch is not installed."""

from __future__ import annotations

import ctypes
import json
import os
import threading
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple

from . import _warnings

LIBRARY_NAME = "libgpumem_torch.so"
ABI_VERSION = 2

# libgpumem_torch's own settings beside the strategies' options (native/src/torch/config.cpp):
# keyword -> variable. Every other keyword comes from the library's registry (registry()).
LIBRARY_SETTINGS = {
    "uvm_limit": "GPUMEM_UVM_LIMIT",
    "oom": "GPUMEM_OOM",
    "oom_window": "GPUMEM_OOM_WINDOW",
    "oom_replay_ms": "GPUMEM_OOM_REPLAY_MS",
}


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
    optional = {"gpumem_strategies": (c_char_p, []), "gpumem_driver_json": (c_char_p, [])}
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
        _warnings.install(lib)
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


class Registry(NamedTuple):
    """What the library's registry (``gpumem_strategies()``) gives the keywords of enable() and
    allocator()."""

    strategies: Tuple[Dict[str, Any], ...]  # every registered strategy, as the library describes it
    names: Tuple[str, ...]  # those GPUMEM_ALLOCATOR takes (CUDA kernels can use their memory), in order
    aliases: Dict[str, str]  # a strategy's older name (deprecated) -> its name
    options: Dict[str, str]  # keyword -> variable
    deprecated_options: Dict[str, str]  # an older keyword -> the variable it now sets
    variables: Tuple[str, ...]  # GPUMEM_ALLOCATOR and every variable a keyword sets


_registry_lock = threading.Lock()
_registry: Optional[Registry] = None
_warned: Set[str] = set()


def _keyword(variable: str) -> str:
    """GPUMEM_POOL_MAX_RESERVED -> pool_max_reserved."""
    return variable[len("GPUMEM_") :].lower() if variable.startswith("GPUMEM_") else variable.lower()


def derive_registry(listed: List[Dict[str, Any]]) -> Registry:
    """The names and keywords of the strategies ``listed`` (the library's JSON). A variable's keyword
    is its name lower-cased without ``GPUMEM_`` (``pool_max_reserved``); one that begins with its
    strategy's name also goes by the rest (``max_reserved``) where no other keyword is spelled so. A
    variable's deprecated spellings (``envAliases``, e.g. GPUMEM_NATIVE_LIBRARY under the plug-in
    strategy's older name) give deprecated keywords (``native_library``)."""
    options = dict(LIBRARY_SETTINGS)
    short: Dict[str, Set[str]] = {}
    older: Dict[str, str] = {}
    for strategy in listed:
        prefix = strategy["name"] + "_"
        for option in strategy["options"]:
            variable = option.get("env")
            if not variable:
                continue
            keyword = _keyword(variable)
            options[keyword] = variable
            if keyword.startswith(prefix):
                short.setdefault(keyword[len(prefix) :], set()).add(variable)
            for old in option.get("envAliases", []):
                older[_keyword(old)] = variable
    for keyword, variables in short.items():
        if len(variables) == 1 and keyword not in options:
            options[keyword] = next(iter(variables))
    return Registry(
        strategies=tuple(listed),
        names=tuple(s["name"] for s in listed if s["flags"]["kernelMemory"]),
        aliases={alias: s["name"] for s in listed for alias in s.get("aliases", [])},
        options=options,
        deprecated_options={k: v for k, v in older.items() if k not in options},
        variables=("GPUMEM_ALLOCATOR",) + tuple(dict.fromkeys(options.values())),
    )


def registry() -> Registry:
    """The library's registry, read once (loading the library: FileNotFoundError where it is
    missing, as load() says; RuntimeError where it is too old to list its strategies)."""
    global _registry
    if _registry is not None:
        return _registry
    lib = load()
    with _registry_lock:
        if _registry is None:
            if not hasattr(lib, "gpumem_strategies"):
                raise RuntimeError(f"gpumem: {loaded_path()} is too old to list its strategies; rebuild it")
            text = lib.gpumem_strategies()
            if text is None:
                raise RuntimeError(last_error())
            _registry = derive_registry(json.loads(text.decode("utf-8")))
        return _registry


def _deprecated(old: str, message: str) -> None:
    """Says once per process that ``old`` is deprecated: a FutureWarning (shown by default), at the
    caller's line outside this package."""
    if old in _warned:
        return
    _warned.add(old)
    _warnings.emit(message, FutureWarning)


def strategy_name(strategy: str) -> str:
    """``strategy`` as GPUMEM_ALLOCATOR gets it: a deprecated older name becomes the strategy's name,
    with a warning; anything else is left for the library to check."""
    reg = registry()
    name = reg.aliases.get(strategy.lower())
    if name is None:
        return strategy
    _deprecated(
        f"strategy:{strategy.lower()}",
        f"gpumem: the strategy name {strategy.lower()!r} is deprecated and will be removed in the next release; use {name!r}",
    )
    return name


def option_values(strategy: Optional[str], options: dict) -> dict:
    """{variable: value} for a strategy and keyword options; TypeError for an unknown option or a
    strategy that is not a string. Reads the library's registry where there is anything to map."""
    values = {}
    if strategy is not None:
        if not isinstance(strategy, str):
            raise TypeError(f"gpumem: expected a strategy name (str) but received {strategy!r} of type {type(strategy).__name__}")
        _refuse_nul("strategy", "GPUMEM_ALLOCATOR", strategy)
        values["GPUMEM_ALLOCATOR"] = strategy_name(strategy)
    if not options:
        return values
    reg = registry()
    for key, value in options.items():
        variable = reg.options.get(key)
        if variable is None and key in reg.deprecated_options:
            variable = reg.deprecated_options[key]
            _deprecated(
                f"option:{key}",
                f"gpumem: the option {key!r} is deprecated and will be removed in the next release; use {_keyword(variable)!r}",
            )
        if variable is None:
            known = ", ".join(sorted(reg.options))
            raise TypeError(f"gpumem: unknown option {key!r}; known options: {known}")
        if value is not None:
            values[variable] = _refuse_nul(key, variable, env_value(value))
    return values


def _refuse_nul(keyword: str, variable: str, text: str) -> str:
    """``text``, or ValueError naming the keyword and its variable where it holds a NUL character:
    the library reads C strings, which would end there ('8GiB\\x00junk' read as 8 GiB), and the
    environment refuses it with a message that names nothing."""
    if "\x00" in text:
        raise ValueError(
            f"gpumem: {keyword}={text!r} ({variable}) is not valid: a value cannot contain a NUL character "
            "(the library would read it cut short there)"
        )
    return text
