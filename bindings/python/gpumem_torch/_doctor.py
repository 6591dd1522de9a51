"""Is this OOM real? A trace and a device capacity in, one verdict out (fits, fragmentation,
real) with the figures behind it: a port of ``diagnoseOom`` and ``recordedCapacity`` of
packages/trace/src/doctor.ts, line for line, so that ``python -m gpumem_torch doctor`` gives the
JSON ``gpumem doctor --json`` gives. The replays run in libgpumem_torch.so's native loop over the
strategies' host twins (_replay.py); everything else is read from the trace (_trace.py).

Keep this module in step with doctor.ts: bindings/python/tests/test_doctor_python.py compares both
programs' JSON on the corpus snapshots and traces."""

from __future__ import annotations

import json
import math
import time
from typing import Any, Dict, List, Optional

from . import _band, _pytorch_twin, _replay, _trace
from ._sizes import format_bytes, to_fixed_2
from ._tracefile import Trace



def default_resolution(capacity_bytes: int) -> int:
    """A thousandth of the capacity, from 4 KiB to 2 MiB, a power of two."""
    target = max(4096, min(_replay.DEFAULT_CAPACITY_RESOLUTION, capacity_bytes / 1024))
    return 2 ** (math.frexp(target)[1] - 1)


def _with_failed_requests(events: List[Any]) -> List[Any]:
    """Each failed request as an allocation freed at once (pointers below zero, which no trace uses)."""
    out = []
    nxt = -1
    for e in events:
        if e[1] != "oom":
            out.append(e)
            continue
        out.append((e[0], "alloc", nxt) + tuple(e[3:]))
        out.append((e[0], "free", nxt) + tuple(e[3:]))
        nxt -= 1
    return out


def _not_ranked_reason(memory: str) -> Optional[str]:
    if memory == "host":
        return "keeps its memory in host memory, not on the GPU"
    if memory == "spills":
        return "spills to host memory past the device: its minimum capacity counts on host memory"
    return None


def _names(items: List[str]) -> str:
    return items[0] if len(items) == 1 else "" if not items else f"{', '.join(items[:-1])} and {items[-1]}"


def _margin(b: int) -> str:
    return f"{format_bytes(b)} to spare" if b >= 0 else f"{format_bytes(-b)} over"


class _Probe:
    def __init__(self, c: _trace.CompiledTrace, replay_capacity: int, held_before: int, resolution: int, search_cap: int,
                 deadline: Optional[float]) -> None:  # fmt: skip
        self.compiled, self.program = c, _replay.Program(c)
        self.replay_capacity, self.held_before = replay_capacity, held_before
        self.resolution, self.search_cap, self.deadline = resolution, search_cap, deadline


def _examine(strategy: Dict[str, Any], p: _Probe, label: Optional[str] = None, options: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Replays ``strategy`` (on its host twin, with ``options`` over the twin's) at the capacity, and
    searches its minimum capacity (examine)."""
    name = strategy["name"]
    given = {k: _pytorch_twin.option_text(v) for k, v in (options or {}).items()}
    spec = _replay.StrategySpec(label or name, name, {**(_replay.host_twin(strategy) or {}), **given})
    memory = _replay.strategy_memory(strategy)
    reason = _not_ranked_reason(memory)
    try:
        if p.deadline is not None and time.monotonic() > p.deadline:
            raise _replay.DeadlineExceeded("the time given to the replays ran out")
        c = p.compiled
        # over address-only memory where the strategy runs on addresses alone: it takes no memory
        address_only = bool(strategy["flags"].get("addressOnly"))
        # fits or not: the first failure decides
        ooms = (
            1
            if p.replay_capacity < c.largest_request_bytes
            else p.program.replay(spec, max(1, p.replay_capacity), address_only, stop_at_first_oom=True).ooms
        )
        row: Dict[str, Any] = {"label": spec.label, "memory": memory, "ranked": reason is None, "fits": ooms == 0}
        if address_only:
            row["addressOnly"] = True
        if reason is not None:
            row["notRankedReason"] = reason
        cap = max(p.search_cap - p.held_before, c.peak_allocated_bytes)
        min_capacity = _replay.find_min_capacity(p.program, c, spec, cap, p.resolution, address_only, p.deadline)
        row["minCapacity"] = min_capacity
        if "bytes" in min_capacity:
            row["needBytes"] = min_capacity["bytes"] + p.held_before
        if ooms == 0:  # it fitted at the capacity: that bounds its need
            row["needBytes"] = min(row.get("needBytes", math.inf), p.replay_capacity + p.held_before)
        return row
    except _replay.DeadlineExceeded:
        raise
    except Exception as e:  # a replay the library refused: the row says why, as doctor.ts's does
        row = {"label": spec.label, "memory": memory, "ranked": reason is None}
        if reason is not None:
            row["notRankedReason"] = reason
        row["error"] = f"Error: {e}"
        return row


def _with_band(row: Dict[str, Any], p: _Probe, relative_error: float, outside: Dict[str, Any], capacity: int,
               error_floor_bytes: int = 0) -> Dict[str, Any]:
    """``row`` with the band of its need and where the capacity falls against it (withBand); the
    search's gap is what lies between its last failure and its need."""
    if "error" in row:
        return row
    if "needBytes" not in row:
        return {**row, "call": "does-not-fit"}  # over the search's cap, itself at least the capacity
    failed = row.get("minCapacity", {}).get("failedBytes")
    gap = 0 if failed is None else max(0, row["needBytes"] - (failed + 1 + p.held_before))
    band = _band.need_band(row["needBytes"], gap, relative_error, outside, error_floor_bytes)
    return {**row, "band": band, "call": _band.band_call(band, capacity)}


def _reductions(c: _trace.CompiledTrace, capacity: int, held_before: int, live_bytes: int) -> List[Dict[str, Any]]:
    """What would bring the live bytes under the capacity, with the trace's figures (reductionsOf)."""
    target = capacity - held_before
    out: List[Dict[str, Any]] = []

    def plan(by: str) -> None:
        p = _trace.off_device_plan(c, by, target, [_OTHER] if by == "tag" else [])
        if p is None:
            return
        after = p["peakBytes"] + held_before
        left = f"{format_bytes(capacity - after)} under" if after <= capacity else f"still {format_bytes(after - capacity)} over"
        out.append({
            "kind": "tiered-by-tag" if by == "tag" else "tiered-by-stream",
            "groups": p["groups"],
            "savedBytes": max(0, live_bytes - after),
            "liveAfterBytes": after,
            "reaches": after <= capacity,
            "exact": True,
            "text": f"Tiered placement by {by}: with the allocations of {_names(p['groups'])} ({format_bytes(p['movedAtPeakBytes'])} at the peak) in host memory "
            f"(the tiered strategy, place('host') around them), the live bytes left on the device peak at {format_bytes(after)}, "
            f"{left} the capacity "
            "(exact from the trace; the device allocator adds its own overhead, and kernels read those bytes over the bus).",
        })  # fmt: skip

    plan("tag")
    if len(c.stream_ids) > 1:
        plan("stream")
    idle = _trace.idle_tags_above(c, target)
    if idle is not None and idle["tags"]:
        after = idle["peakBytes"] + held_before
        out.append({
            "kind": "sleep-idle-tags",
            "groups": idle["tags"],
            "savedBytes": max(0, live_bytes - after),
            "liveAfterBytes": after,
            "reaches": False,  # an estimate: a bound on the saving, never a promise
            "exact": False,
            "text": f"Sleeping idle tags: {_names(idle['tags'])} hold {format_bytes(idle['heldAtPeakBytes'])} at the peak and allocate or free nothing while the live bytes exceed the capacity; "
            f"asleep over those stretches (sleep by tag, woken after), the live bytes would peak at {format_bytes(after)} "
            "(an estimate: the trace records allocations and frees, not kernels, so a tag idle in the allocator may still be read there).",
        })  # fmt: skip
    transient = _trace.transient_at_peak(c)
    if transient is not None and transient["bytes"] > 0:
        after = live_bytes - transient["bytes"]
        out.append({
            "kind": "checkpointing",
            "savedBytes": transient["bytes"],
            "liveAfterBytes": after,
            "reaches": False,  # an upper bound on the saving
            "exact": False,
            "text": f"Activation checkpointing: {format_bytes(transient['bytes'])} of the live bytes at the peak are the step's own (freed later in the trace before its teardown, or allocated after the trough before the peak): "
            f"activations, gradients and temporaries; checkpointing keeps fewer activations and recomputes them, so it removes part of that, down to {format_bytes(after)} at the very best "
            f"(an upper bound on the saving: the trace does not say which of these bytes are activations; {format_bytes(transient['standingBytes'])} are standing state such as weights and optimizer state).",
        })  # fmt: skip
    return out


_OTHER = "other"  # a snapshot's catch-all frame tag: names nothing to move


def diagnose_oom(trace: Trace, capacity_bytes: int, resolution_bytes: Optional[int] = None, failed_requests: str = "replay",
                 time_limit_s: Optional[float] = None, outside: Optional[Dict[str, Any]] = None,
                 pytorch_model_error: float = _band.DEFAULT_PYTORCH_MODEL_ERROR,
                 pytorch_model_error_floor_bytes: int = _band.DEFAULT_PYTORCH_MODEL_ERROR_FLOOR_BYTES,
                 strategy_model_error: float = _band.DEFAULT_STRATEGY_MODEL_ERROR) -> Dict[str, Any]:  # fmt: skip
    """The verdict on ``trace`` at ``capacity_bytes``: diagnoseOom with the strategies ``gpumem
    doctor`` judges, on their host twins, over address-only memory where they can. ``outside``: the
    memory outside the allocator (default _band.DEFAULT_OUTSIDE); ``time_limit_s`` bounds the
    replays (DeadlineExceeded)."""
    if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int) or not 0 < capacity_bytes <= 2**53 - 1:
        raise ValueError(f"Expected a positive integer for capacityBytes but received {capacity_bytes!r}")
    if failed_requests not in ("replay", "skip"):
        raise ValueError(f"Expected one of 'replay', 'skip' for failedRequests but received {failed_requests!r}")
    outside = dict(_band.DEFAULT_OUTSIDE if outside is None else outside)
    _band.check_outside(outside)
    _band.check_relative_error(pytorch_model_error, "pytorchModelError")
    _band.check_relative_error(strategy_model_error, "strategyModelError")
    floor = pytorch_model_error_floor_bytes
    if isinstance(floor, bool) or not isinstance(floor, int) or not 0 <= floor <= 2**53 - 1:
        raise ValueError(f"Expected a non-negative integer for pytorchModelErrorFloorBytes but received {floor!r}")
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    failed = sum(1 for e in trace.events if e[1] == "oom")
    events = _with_failed_requests(trace.events) if failed_requests == "replay" and failed > 0 else trace.events
    c = _trace.compile_trace(events, trace.header.get("tags"))
    snapshot = trace.header.get("snapshot") if trace.header.get("source") == "torch-snapshot" else None
    held_before = snapshot["allocatedBeforeHistoryBytes"] if snapshot else 0
    live_bytes = max(_trace.live_peak(events, held_before), c.peak_allocated_bytes)
    resolution = resolution_bytes if resolution_bytes is not None else default_resolution(capacity_bytes)
    p = _Probe(c, capacity_bytes - held_before, held_before, resolution, max(capacity_bytes, 2 * live_bytes), deadline)

    def banded(row: Dict[str, Any], error: float, floor: int = 0) -> Dict[str, Any]:
        return _with_band(row, p, error, outside, capacity_bytes, floor)

    strategies = _replay.doctor_strategies()
    rows = [banded(_examine(s, p, _pytorch_twin.strategy_label(s["name"])), strategy_model_error) for s in strategies]
    # PyTorch's default: its twin with the settings the recording ran under; the strategies' row where
    # those are none (the same spec), else a replay of its own
    model_label, model_options = _pytorch_twin.pytorch_twin((snapshot or {}).get("allocatorSettings"))
    model_index = next((k for k, s in enumerate(strategies) if s["name"] == _pytorch_twin.TWIN_NAME and not model_options), -1)
    if model_index >= 0:
        pytorch_row = rows[model_index]
    else:
        twin = next(s for s in _replay.registered_strategies() if s["name"] == _pytorch_twin.TWIN_NAME)
        pytorch_row = _examine(twin, p, model_label, model_options)
    recorded = (trace.pytorch or {}).get("peakReservedBytes")
    recorded = recorded if isinstance(recorded, int) and recorded > 0 else None
    # the model's row as its own, banded with the model's error rather than the strategy's
    model_row = {k: v for k, v in pytorch_row.items() if k not in ("band", "call")}
    pytorch = banded(model_row, pytorch_model_error, pytorch_model_error_floor_bytes)
    if recorded is not None:
        pytorch["recordedPeakReservedBytes"] = recorded
    rows.sort(key=lambda r: (0 if r["ranked"] else 1, r.get("needBytes", math.inf)))

    ranked = [r for r in rows if r["ranked"] and "error" not in r and "band" in r]
    best_row = ranked[0] if ranked else None  # sorted by need
    best = None
    if best_row is not None:
        best = {
            "label": best_row["label"],
            "needBytes": best_row["needBytes"],
            "marginBytes": capacity_bytes - best_row["needBytes"],
            "fits": best_row["call"] == "fits",
            "band": best_row["band"],
            "call": best_row["call"],
        }

    # The live bytes decide first (nothing needs less), then PyTorch's default as modelled, or, when
    # its replay failed, the best ranked strategy. A capacity inside the deciding band is too close.
    pytorch_name = "PyTorch's default allocator (replayed by its twin, the caching strategy)"
    live_band = _band.need_band(live_bytes, 0, 0, outside)

    def decided(by: str, label: str, band: Dict[str, int], call: str) -> Dict[str, Any]:
        return {"by": by, "label": label, "band": band, "call": call, "marginBytes": _band.band_margin(band, capacity_bytes)}

    live_call = _band.band_call(live_band, capacity_bytes)
    if live_call != "fits":
        decision = decided("live", "the live bytes", live_band, live_call)
    elif "error" not in pytorch and "band" in pytorch:
        decision = decided("pytorch", pytorch_name, pytorch["band"], pytorch["call"])
    elif "error" not in pytorch or best is None:
        # no need known under the search's cap: it does not fit; the band is the cap's
        cap_band = _band.need_band(max(p.search_cap, capacity_bytes + 1), 0, 0, outside)
        no_error = "error" not in pytorch
        decision = decided("pytorch" if no_error else "best", pytorch_name if no_error else "no ranked strategy", cap_band, "does-not-fit")
    else:
        decision = decided("best", best["label"], best["band"], best["call"])
    if decision["call"] == "too-close":
        kind = "too-close"
    else:
        kind = "real" if decision["by"] == "live" else "fits" if decision["call"] == "fits" else "fragmentation"

    def need(r: Dict[str, Any]) -> str:
        return format_bytes(r["needBytes"]) if "needBytes" in r else f"more than {format_bytes(p.search_cap)}"

    def band_text(b: Dict[str, int]) -> str:
        return f"{format_bytes(b['lowBytes'])} to {format_bytes(b['highBytes'])} on the device"

    def called(call: Optional[str]) -> str:
        return "fits" if call == "fits" else "is too close to call" if call == "too-close" else "does not fit"

    lines: List[str] = []
    if "error" in pytorch:
        pytorch_line = f"{pytorch_name} could not be replayed: {pytorch['error'].split(chr(10))[0]}."
    else:
        tail = f" ({band_text(pytorch['band'])}), {_margin(capacity_bytes - pytorch['band']['highBytes'])} at the band's top" if "band" in pytorch else ""
        pytorch_line = f"{pytorch_name} {called(pytorch.get('call'))}: it needs {need(pytorch)}{tail}."
    live = f"the live bytes peak at {format_bytes(live_bytes)}"
    if kind == "too-close":
        d = decision
        b = d["band"]
        what = live if d["label"] == "the live bytes" else f"{d['label']} needs {format_bytes(b['needBytes'])}"
        model = f" and the model's error (±{format_bytes(b['modelErrorBytes'])})" if b["modelErrorBytes"] > 0 else ""
        lines.append(
            f"Too close to call: {what}, which with the memory outside the allocator "
            f"({format_bytes(b['outsideLowBytes'])} to {format_bytes(b['outsideHighBytes'])}){model} "
            f"makes {band_text(b)}; the capacity of {format_bytes(capacity_bytes)} lies inside that band, {_margin(d['marginBytes'])} its middle. "
            "Measure the memory outside the allocator on this machine (--outside) to narrow it, or run it."
        )
        if d["by"] != "live" and best:
            lines.append(f"The best ranked strategy, {best['label']}, {called(best['call'])}: it needs {format_bytes(best['needBytes'])} ({band_text(best['band'])}).")
    elif kind == "real":
        lines.append(
            f"Real: {live}, {format_bytes(live_bytes - capacity_bytes)} more than the capacity of {format_bytes(capacity_bytes)}; no allocator can run this program in it as it is."
            if live_bytes > capacity_bytes
            else f"Real: {live}, which with at least {format_bytes(outside['lowBytes'])} outside the allocator is {format_bytes(live_band['lowBytes'] - capacity_bytes)} more than the capacity of {format_bytes(capacity_bytes)}; no allocator can run this program in it as it is."
        )
    elif kind == "fragmentation":
        lines.append(
            f"Fragmentation: {live}, under the capacity of {format_bytes(capacity_bytes)}, but {pytorch_name} needs {need(pytorch)}: "
            "memory it holds in blocks no request can use, even after it frees its cached segments and retries."
        )
        if best and best["fits"]:
            lines.append(f"{best['label']} fits in {format_bytes(best['needBytes'])} ({band_text(best['band'])}), {_margin(best['marginBytes'])}.")
        elif best and best["call"] == "too-close":
            lines.append(f"The closest ranked strategy, {best['label']}, is too close to call: it needs {format_bytes(best['needBytes'])} ({band_text(best['band'])}).")
        elif best:
            lines.append(f"No ranked strategy fits either: the closest, {best['label']}, needs {format_bytes(best['needBytes'])} ({_margin(best['marginBytes'])}).")
        else:
            lines.append("No ranked strategy fitted under the search's cap.")
    else:
        lines.append(
            f"Fits: under {best['label']}, which needs {format_bytes(best['needBytes'])} ({band_text(best['band'])}) of {format_bytes(capacity_bytes)}, {_margin(best['marginBytes'])}; {live}."
            if best
            else f"Fits: {pytorch_name} runs it in {format_bytes(capacity_bytes)}; {live}."
        )
    if kind != "fragmentation":
        lines.append(pytorch_line)

    target = capacity_bytes - held_before
    # what the live bytes must come under: the capacity less the most memory outside the allocator
    wants_reductions = kind == "real" or (kind == "too-close" and decision["by"] == "live") or (kind == "fragmentation" and not (best and best["fits"]))
    reductions = _reductions(c, max(0, capacity_bytes - outside["highBytes"]), held_before, live_bytes) if wants_reductions else []
    if reductions:
        lines.append("What would reduce the live bytes:")
        lines.extend(f"- {r['text']}" for r in reductions)
    elif kind == "real":
        lines.append("The trace names no tags or streams to move and nothing freed around its peak: fewer or smaller allocations (a smaller batch) are what is left.")

    notes = [
        "Live bytes count each block until its free completed where the format records it (a PyTorch snapshot's free_completed); no allocator needs less than their peak.",
        f"PyTorch's default caching allocator is modelled by its twin, {pytorch['label']}: CUDACachingAllocator's rounding, small and large pools, best fit per stream, splitting, and when a segment cannot be had its release of cached segments and retry, with the settings the recording ran under; replayed at the capacity. The peak it reserved in the recording, with no limit, is not its need, since it keeps freed blocks cached until a request fails.",
        f"Minimum capacities are found by bisection to within {format_bytes(resolution)}; a strategy that fitted at the capacity needs at most the capacity.",
    ]  # fmt: skip
    width = decision["band"]["highBytes"] - decision["band"]["lowBytes"]
    if width > capacity_bytes / 100:
        source = "the model's error" if decision["band"]["modelErrorBytes"] * 2 > outside["highBytes"] - outside["lowBytes"] else "the spread of the memory outside the allocator"
        why = f": more than 1%, from {source} (--outside LOW..HIGH as measured here narrows it)."
    else:
        why = "."
    notes.append(
        f"Every need has a band: the device memory the program needs under it is the allocator's need, ± the model's error (PyTorch's model {to_fixed_2(100 * pytorch_model_error)}% and {format_bytes(pytorch_model_error_floor_bytes)} at the least, gpumem's strategies {to_fixed_2(100 * strategy_model_error)}%: their replay runs their own code), "
        f"less the search's gap, plus the memory outside the allocator, {format_bytes(outside['lowBytes'])} to {format_bytes(outside['highBytes'])} ({outside['source']}). "
        f"A capacity inside the band of the need that decides is too close to call. The deciding band here is {format_bytes(width)} wide, {to_fixed_2((100 * width) / capacity_bytes)}% of the capacity"
        + why
    )  # fmt: skip
    if recorded is not None:
        notes.append(f"The recording reserved {format_bytes(recorded)} at most under PyTorch, with no limit.")
    if snapshot and (snapshot.get("allocatorSettings") or {}).get("expandable_segments") is True:
        notes.append("The recording ran with expandable_segments:True: the twin replays it with expandable segments too.")
    if held_before > 0:
        notes.append(f"The history starts mid-run: {format_bytes(held_before)} allocated before it are counted as held for all of it in every replay (an estimate on the high side: some are freed during it).")
    if failed > 0:
        s = "" if failed == 1 else "s"
        notes.append(
            f"{failed} request{s} failed in the recording: each is replayed as an allocation freed at once, the least the program asked for there."
            if failed_requests == "replay"
            else f"{failed} request{s} failed in the recording and {'is' if failed == 1 else 'are'} left out: the figures are those of the program without them."
        )
    if target < c.largest_request_bytes and kind != "real":
        notes.append(f"The largest single request, {format_bytes(c.largest_request_bytes)}, does not fit in what the capacity leaves.")
    host_bound = [r["label"] for r in rows if r["ranked"] and r.get("addressOnly") is not True and "error" not in r]
    notes.append(
        "Replayed on the strategies' host twins (the same logic), over address-only memory where a strategy runs on addresses alone (they take no memory): the same verdict on any machine."
        + (f" {_names(host_bound)} replayed over this machine's host memory (no address-only leaf): a failure of the host there would read as out of memory." if host_bound else "")
    )  # fmt: skip
    not_ranked = [r for r in rows if not r["ranked"]]
    if not_ranked:
        listed = "; ".join(f"{r['label']} ({r['notRankedReason']})" for r in not_ranked)
        notes.append(f"Not ranked: {listed}.")
    failed_rows = [r for r in rows if "error" in r]
    if failed_rows:
        listed = "; ".join(f"{r['label']} ({r['error'].splitlines()[0]})" for r in failed_rows)
        notes.append(f"Failed: {listed}.")

    verdict: Dict[str, Any] = {
        "kind": kind,
        "capacityBytes": capacity_bytes,
        "decision": decision,
        "uncertainty": {"outside": outside, "pytorchModelError": _json_number(pytorch_model_error), "pytorchModelErrorFloorBytes": pytorch_model_error_floor_bytes, "strategyModelError": _json_number(strategy_model_error)},
        "liveBytes": live_bytes,
        "heldBeforeTraceBytes": held_before,
        "largestRequestBytes": c.largest_request_bytes,
        "failedRequests": {"count": failed, "handling": failed_requests},
        "strategies": rows,
        "pytorch": pytorch,
    }  # fmt: skip
    if best is not None:
        verdict["best"] = best
    if kind == "real":
        verdict["excessBytes"] = live_band["lowBytes"] - capacity_bytes
    peak: Dict[str, Any] = {
        "byTag": [{"name": s["tag"], "bytes": s["bytes"]} for s in _trace.peak_by_tag(c)],
        "byStream": _trace.peak_by_stream(c),
        "bySizeClass": _trace.peak_by_size_class(c),
    }
    transient = _trace.transient_at_peak(c)
    if transient is not None:
        peak["transient"] = transient
    verdict.update({"peak": peak, "reductions": reductions, "lines": lines, "notes": notes})
    return verdict


def _json_number(value: float) -> Any:
    """A number as JavaScript's JSON writes it: an integral value without '.0'."""
    return int(value) if float(value).is_integer() else value


def recorded_capacity(trace: Trace) -> Optional[Dict[str, Any]]:
    """The capacity a snapshot records at its first out-of-memory entry: what PyTorch reserved plus
    what the driver still had free (recordedCapacity); None for other traces."""
    snapshot = trace.header.get("snapshot") if trace.header.get("source") == "torch-snapshot" else None
    oom = snapshot.get("firstOom") if snapshot else None
    if oom is None:
        return None
    return {
        "bytes": oom["reservedBytes"] + oom["deviceFreeBytes"],
        "source": f"the snapshot's first out-of-memory entry: {format_bytes(oom['reservedBytes'])} reserved by PyTorch + {format_bytes(oom['deviceFreeBytes'])} free on the device",
    }


def origin_of(trace: Trace) -> str:
    h = trace.header
    parts = [h.get("source"), f"allocator '{h['allocator']}'" if h.get("allocator") else None, h.get("device"), h.get("createdAt")]
    return ", ".join(p for p in parts if p)


def doctor_json(file: str, trace: Trace, capacity_source: str, verdict: Dict[str, Any]) -> str:
    """The JSON ``gpumem doctor --json`` writes: the file, the trace, where the capacity came from, the verdict."""
    body = {"file": file, "trace": {"format": trace.format, "origin": origin_of(trace), "events": len(trace.events)}, "capacitySource": capacity_source, "verdict": verdict}
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"
