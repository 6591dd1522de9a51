"""Replaying a compiled trace through gpumem's strategies in libgpumem_torch.so's native loop
(``gpumem_replay``: the core's chain builder and replay loop, as the Node binding runs them), each
at a byte limit, and the smallest limit a strategy fits in, found by bisection (ports of
packages/trace/src/min-capacity.ts and the doctor's choice of strategies: those with logic of their
own, on their host twins). Only the standard library and the library."""

from __future__ import annotations

import ctypes
import time
from array import array
from typing import Any, Callable, Dict, List, NamedTuple, Optional

from . import _library
from ._trace import CompiledTrace

DEFAULT_CAPACITY_RESOLUTION = 2 * 1024 * 1024
# gpumem_replay's flags (gpumem_torch.h)
REPLAY_ADDRESS_ONLY = 1
REPLAY_STOP_AT_FIRST_OOM = 2


class ReplayResult(ctypes.Structure):
    """Mirror of ``gpumem_replay_result`` (native/src/torch/gpumem_torch.h)."""

    _fields_ = [
        ("ooms", ctypes.c_uint64),
        ("allocs", ctypes.c_uint64),
        ("frees", ctypes.c_uint64),
        ("skipped_frees", ctypes.c_uint64),
        ("peak_allocated_bytes", ctypes.c_uint64),
        ("peak_reserved_bytes", ctypes.c_uint64),
        ("end_reserved_bytes", ctypes.c_uint64),
    ]


class ReplayError(RuntimeError):
    """A replay that could not run (a strategy or option the library refuses, a chain that could
    not be built): the library's message."""


class DeadlineExceeded(TimeoutError):
    """The time given to the replays ran out."""


class StrategySpec(NamedTuple):
    """A strategy to replay: its label, registered name, and options (JavaScript keys, text values)."""

    label: str
    name: str
    options: Dict[str, str]


def _replay_function() -> Any:
    lib = _library.load()
    if not hasattr(lib, "gpumem_replay"):
        raise ReplayError(f"gpumem: {_library.loaded_path()} has no gpumem_replay (an older build); rebuild native/")
    fn = lib.gpumem_replay
    if fn.restype is not ctypes.c_int or fn.argtypes is None:
        p = ctypes.POINTER
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_char_p, p(ctypes.c_char_p), p(ctypes.c_char_p), ctypes.c_size_t, ctypes.c_uint64,
                       p(ctypes.c_uint8), p(ctypes.c_uint32), p(ctypes.c_uint64), p(ctypes.c_uint64),
                       ctypes.c_size_t, ctypes.c_size_t, ctypes.c_uint, p(ReplayResult)]  # fmt: skip
    return fn


class Program:
    """A compiled trace as the library's arrays, made once and replayed at many limits. Streams: 0
    stays the default stream, every other id gets a key of its own (1, 2, ...), as host streams are
    keys the pool keeps free lists by."""

    def __init__(self, c: CompiledTrace) -> None:
        n = len(c.action)
        self.ops, self.slots = n, c.slots
        handles = [0 if sid == 0 else k + 1 for k, sid in enumerate(c.stream_ids)]
        self._action = array("B", c.action)
        self._slot = array("I", c.slot)
        self._bytes = array("Q", c.bytes)
        self._stream = array("Q", (handles[i] for i in c.stream_index))
        self._args = [self._pointer(a, t) for a, t in (
            (self._action, ctypes.c_uint8), (self._slot, ctypes.c_uint32), (self._bytes, ctypes.c_uint64), (self._stream, ctypes.c_uint64))]  # fmt: skip

    @staticmethod
    def _pointer(a: array, t: Any) -> Any:
        if len(a) == 0:
            return ctypes.POINTER(t)()
        return ctypes.cast((t * len(a)).from_buffer(a), ctypes.POINTER(t))

    def replay(self, spec: StrategySpec, limit_bytes: int, address_only: bool = False, stop_at_first_oom: bool = False) -> ReplayResult:
        """One pass of ``spec`` at ``limit_bytes`` (at least 1): over address-only memory (a strategy
        with the registry's addressOnly flag: it takes none), ending at the first out-of-memory
        where asked (a caller that asks only whether it fits)."""
        flags = (REPLAY_ADDRESS_ONLY if address_only else 0) | (REPLAY_STOP_AT_FIRST_OOM if stop_at_first_oom else 0)
        fn = _replay_function()
        keys = list(spec.options)
        key_array = (ctypes.c_char_p * max(1, len(keys)))(*[k.encode() for k in keys])
        value_array = (ctypes.c_char_p * max(1, len(keys)))(*[str(spec.options[k]).encode() for k in keys])
        out = ReplayResult()
        rc = fn(spec.name.encode(), key_array, value_array, len(keys), max(1, int(limit_bytes)), *self._args, self.ops, self.slots, flags, ctypes.byref(out))
        if rc != 0:
            raise ReplayError(_library.last_error() or f"gpumem: gpumem_replay failed ({rc})")
        return out


def search_min_capacity(fits: Callable[[int], bool], lower_bytes: int, cap_bytes: int, resolution_bytes: int) -> Dict[str, Any]:
    """searchMinCapacity: the lower bound, then doubling up to the cap, then halving the gap between
    the last failure and the first fit down to the resolution."""
    probes = 0

    def probe(b: int) -> bool:
        nonlocal probes
        probes += 1
        return fits(b)

    base: Dict[str, Any] = {"capBytes": cap_bytes, "resolutionBytes": resolution_bytes}
    if lower_bytes == 0:
        return {**base, "bytes": 0, "atLowerBound": True, "probes": probes}
    if lower_bytes > cap_bytes:
        return {**base, "atLowerBound": False, "probes": probes, "failedBytes": cap_bytes}
    if probe(lower_bytes):
        return {**base, "bytes": lower_bytes, "atLowerBound": True, "probes": probes}
    failed, fit = lower_bytes, -1

    def double() -> int:
        return min(cap_bytes, max(failed * 2, failed + resolution_bytes))

    nxt = double()
    while fit < 0:
        if failed >= cap_bytes:
            return {**base, "failedBytes": failed, "atLowerBound": False, "probes": probes}
        if probe(nxt):
            fit = nxt
        else:
            failed = nxt
            nxt = double()
    while fit - failed > resolution_bytes:
        mid = failed + (fit - failed) // 2
        if probe(mid):
            fit = mid
        else:
            failed = mid
    return {**base, "bytes": fit, "failedBytes": failed, "atLowerBound": False, "probes": probes}


def find_min_capacity(program: Program, c: CompiledTrace, spec: StrategySpec, cap_bytes: int, resolution_bytes: int,
                      address_only: bool = False, deadline: Optional[float] = None) -> Dict[str, Any]:  # fmt: skip
    """findMinCapacity on the host, where a replay is deterministic: one search, each probe ending at
    its first out-of-memory (fits or not is all it asks)."""

    def fits(capacity: int) -> bool:
        if deadline is not None and time.monotonic() > deadline:
            raise DeadlineExceeded("the time given to the replays ran out")
        return program.replay(spec, capacity, address_only, stop_at_first_oom=True).ooms == 0

    return {**search_min_capacity(fits, c.peak_allocated_bytes, cap_bytes, resolution_bytes), "searches": 1}


def registered_strategies() -> List[Dict[str, Any]]:
    """Every strategy of the library's registry, as it describes them (gpumem_strategies)."""
    return list(_library.registry().strategies)


def driver_strategies() -> List[str]:
    """The strategies the doctor leaves out: made without options, but needing CUDA (the driver's memory)."""
    return [s["name"] for s in registered_strategies() if not s["flags"]["requiresOptions"] and s["flags"]["requiresCuda"]]


def doctor_strategies() -> List[Dict[str, Any]]:
    """The strategies the doctor judges, in the registry's order, each as the library describes it:
    those made without options that need no CUDA device (the driver's own, cudaMalloc per call,
    managed memory, cudaMallocAsync's pool, are left out: a replay under a byte limit counts what
    they ask for, not the driver's rounding or caching), as ``gpumem doctor`` picks them."""
    return [s for s in registered_strategies() if not s["flags"]["requiresOptions"] and not s["flags"]["requiresCuda"]]


def host_twin(strategy: Dict[str, Any]) -> Optional[Dict[str, str]]:
    """The options that make ``strategy`` its host twin (the same logic over host memory): its
    placement option set to 'host', where it has one with that choice (the registry's
    hostTwinOptions); None where it has none."""
    for option in strategy["options"]:
        if option.get("placement") and "host" in option.get("choices", []):
            return {option["key"]: "host"}
    return None


def strategy_memory(strategy: Dict[str, Any]) -> str:
    """'host', 'spills' or 'device', from the registry's flags (strategyMemory of advice.ts)."""
    flags = strategy["flags"]
    if flags["hostMemory"]:
        return "host"
    return "spills" if flags["spillsToHost"] else "device"
