"""``diagnose_ooms()``: the doctor at PyTorch's own out-of-memory failures. PyTorch's caching allocator
calls its OOM observers (``torch._C._cuda_attach_out_of_memory_observer(fn)``, as
``fn(device, alloc, device_alloc, device_free)``) after it freed its cache and retried, before it
raises; with the allocation history recorded (``torch.cuda.memory._record_memory_history()``),
``torch.cuda.memory._snapshot()`` there holds the history up to the failure. The observer reads it,
judges it as ``gpumem doctor`` does (_doctor.py), prints the verdict and the setting that would have
served to stderr, and keeps it for ``last_oom_diagnosis()``.

It never raises into PyTorch's OOM path: any failure of its own is one line on stderr, and
PyTorch's OutOfMemoryError stands. Its replays are bounded in time (``time_limit_ms``)."""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Dict, List, Optional, TextIO

from . import _band, _doctor, _pytorch_twin, _replay, _snapshot, _trace
from ._sizes import format_bytes

DEFAULT_TIME_LIMIT_MS = 30_000
DEFAULT_MAX_ENTRIES = 100_000

_lock = threading.Lock()
_state: Dict[str, Any] = {"enabled": False, "attached": False, "time_limit_ms": DEFAULT_TIME_LIMIT_MS, "stream": None}
_last: Optional[Dict[str, Any]] = None


def expandable_segments_fit(trace: Any, verdict: Dict[str, Any]) -> bool:
    """Whether PyTorch's allocator with expandable_segments:True would have run the recording: its
    twin with expandableSegments, replayed once at the capacity less the most memory outside the
    allocator and the model's error (the top of its band), on the doctor's terms (failed requests
    replayed, bytes from before the history held)."""
    twin = next(s for s in _replay.registered_strategies() if s["name"] == _pytorch_twin.TWIN_NAME)
    c = _trace.compile_trace(_doctor._with_failed_requests(trace.events), None)
    u = verdict["uncertainty"]
    room = verdict["capacityBytes"] - verdict["heldBeforeTraceBytes"] - u["outside"]["highBytes"]
    room -= int(verdict["capacityBytes"] * u["pytorchModelError"])
    if room < max(1, c.largest_request_bytes):
        return False
    spec = _replay.StrategySpec("caching", "caching", {**(_replay.host_twin(twin) or {}), "expandableSegments": "1"})
    return _replay.Program(c).replay(spec, room, bool(twin["flags"].get("addressOnly")), stop_at_first_oom=True).ooms == 0


def _setting_that_serves(verdict: Dict[str, Any], expandable_fits: bool) -> List[str]:
    """Which setting would have run the program at this capacity, in words."""
    kind = verdict["kind"]
    if kind == "real":
        return ["No allocator setting serves: the live bytes alone exceed the capacity; see what would reduce them above."]
    if kind == "too-close" and verdict["decision"]["by"] == "live":
        return ["No allocator setting is sure to serve: the live bytes and the memory outside the allocator are too close to the capacity."]
    out = []
    if expandable_fits:
        out.append(
            "PyTorch's PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True would likely have served: its twin (caching with "
            "expandableSegments) runs the recording in the capacity less the memory outside the allocator."
        )
    best = verdict.get("best")
    if best is not None and best["fits"]:
        out.append(
            f"gpumem's {best['label']} strategy would have served: it needs {format_bytes(best['needBytes'])} "
            f"(gpumem_torch.enable({best['label'].split(' ')[0]!r}) before CUDA is first used)."
        )
    if kind == "fits":
        out.insert(0, "The twin of PyTorch's default fits at this capacity: memory outside the caching allocator (the CUDA "
                      "context, libraries' workspaces) took more than the band allows, or the settings differ from the recording's.")  # fmt: skip
    if not out:
        out.append("No strategy the doctor replays fits at this capacity either.")
    return out


def diagnose(snapshot: Dict[str, Any], device: int, alloc: int, device_alloc: int, device_free: int,
             time_limit_s: Optional[float]) -> Dict[str, Any]:  # fmt: skip
    """The doctor's verdict on an OOM from the observer's arguments and the snapshot taken there.
    The capacity: the snapshot's recorded one (what PyTorch reserved plus what the driver had free),
    no more than ``device_alloc`` (the card's total, or what set_per_process_memory_fraction allows)."""
    trace = _snapshot.snapshot_trace(snapshot, device)
    recorded = _doctor.recorded_capacity(trace)
    if recorded is not None and recorded["bytes"] <= device_alloc:
        # what the allocator could have had: the memory outside it is taken off already
        capacity, source = recorded["bytes"], recorded["source"]
        outside = _band.outside_memory(0, 0, f"none counted: the capacity is {source}, what the allocator could have had")
    else:
        capacity, source = device_alloc, "the observer's device_alloc (the device's memory PyTorch may use)"
        outside = dict(_band.DEFAULT_OUTSIDE)
    verdict = _doctor.diagnose_oom(trace, capacity, time_limit_s=time_limit_s, outside=outside)
    settings = (trace.header.get("snapshot") or {}).get("allocatorSettings") or {}
    # asked only where PyTorch's default did not fit and the recording did not already expand
    wanted = verdict["kind"] in ("fragmentation", "too-close") and verdict["decision"]["by"] != "live" and settings.get("expandable_segments") is not True
    expandable_fits = wanted and expandable_segments_fit(trace, verdict)
    return {
        "device": device,
        "request_bytes": alloc,
        "device_alloc_bytes": device_alloc,
        "device_free_bytes": device_free,
        "capacity_source": source,
        "verdict": verdict,
        "expandable_segments_fits": expandable_fits if wanted else None,
        "serves": _setting_that_serves(verdict, expandable_fits),
    }


def report_text(d: Dict[str, Any]) -> str:
    v = d["verdict"]
    lines = [f"gpumem: PyTorch ran out of memory on cuda:{d['device']} (a request of {format_bytes(d['request_bytes'])}); "
             f"the doctor's verdict at {format_bytes(v['capacityBytes'])}: {v['kind']}"]  # fmt: skip
    lines += [f"  {line}" for line in v["lines"]]
    lines += [f"  {line}" for line in d["serves"]]
    return "\n".join(lines) + "\n"


def make_observer(take_snapshot: Callable[[], Dict[str, Any]], stream: Callable[[], TextIO]) -> Callable[[int, int, int, int], None]:
    """The function PyTorch calls at an OOM: takes the snapshot, diagnoses, prints, keeps the result.
    Catches everything: PyTorch's own error must stand."""

    def on_oom(device: int, alloc: int, device_alloc: int, device_free: int) -> None:
        global _last
        if not _state["enabled"]:
            return
        out = stream()
        try:
            limit_ms = _state["time_limit_ms"]
            d = diagnose(take_snapshot(), int(device), int(alloc), int(device_alloc), int(device_free), None if limit_ms is None else limit_ms / 1000)
            with _lock:
                _last = d
            out.write(report_text(d))
        except BaseException as e:  # noqa: BLE001  # never into PyTorch's OOM path
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            try:
                out.write(f"gpumem: diagnose_ooms could not diagnose this out-of-memory failure: {type(e).__name__}: {reason}\n")
            except Exception:  # noqa: BLE001  # a closed stderr: nothing left to tell
                pass

    return on_oom


def _torch_snapshot() -> Dict[str, Any]:
    import torch  # noqa: PLC0415  # only in PyTorch's OOM path

    return torch.cuda.memory._snapshot()


def diagnose_ooms(enable: bool = True, record_history: bool = False, max_entries: int = DEFAULT_MAX_ENTRIES,
                  time_limit_ms: Optional[int] = DEFAULT_TIME_LIMIT_MS) -> None:  # fmt: skip
    """Diagnoses PyTorch's own out-of-memory failures (its default caching allocator) as
    ``gpumem doctor`` does: at each, prints the verdict (fits, fragmentation, real) and the setting
    that would have served (``expandable_segments:True``, a gpumem strategy) to stderr, and keeps it
    for ``last_oom_diagnosis()``. Needs the allocation history: ``record_history=True`` turns it on
    (``torch.cuda.memory._record_memory_history(max_entries=max_entries)``), or turn it on yourself.
    ``time_limit_ms`` bounds the replays (None: no bound); ``enable=False`` turns it off (the
    observer stays attached, PyTorch has no way to detach one, and does nothing)."""
    import torch  # noqa: PLC0415

    if time_limit_ms is not None and (isinstance(time_limit_ms, bool) or not isinstance(time_limit_ms, int) or time_limit_ms <= 0):
        raise ValueError(f"Expected a positive integer or None for time_limit_ms but received {time_limit_ms!r}")
    with _lock:
        _state["time_limit_ms"] = time_limit_ms
        _state["enabled"] = bool(enable)
        if enable and not _state["attached"]:
            torch._C._cuda_attach_out_of_memory_observer(make_observer(_torch_snapshot, lambda: sys.stderr))
            _state["attached"] = True
    if enable and record_history:
        torch.cuda.memory._record_memory_history(max_entries=max_entries)


def set_enabled_for_test(enabled: bool, time_limit_ms: Optional[int] = DEFAULT_TIME_LIMIT_MS) -> None:
    """What diagnose_ooms() sets, without torch: for tests that call an observer directly."""
    with _lock:
        _state["enabled"], _state["time_limit_ms"] = enabled, time_limit_ms


def last_oom_diagnosis() -> Optional[Dict[str, Any]]:
    """The diagnosis of the last out-of-memory failure of PyTorch's allocator that diagnose_ooms()
    saw, or None: ``device``, ``request_bytes``, ``device_alloc_bytes``, ``device_free_bytes``,
    ``capacity_source``, ``verdict`` (the doctor's, as in ``gpumem doctor --json``),
    ``expandable_segments_fits`` (whether PyTorch's twin with expandable segments runs the recording
    at the capacity; None where not asked: the default fitted, the live bytes decided, or the
    recording already expanded) and ``serves`` (the settings that would have served, in words)."""
    with _lock:
        return _last
