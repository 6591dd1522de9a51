"""``gpumem_torch.doctor()``: the doctor's verdict from Python, on a snapshot file, a snapshot dict, or
this process's own history (``torch.cuda.memory._snapshot()``), and the capacity it is judged
against. Torch is imported only where the snapshot or the capacity must come from this process."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple, Union

from . import _band, _doctor, _snapshot, _tracefile
from ._sizes import parse_size

Snapshot = Union[None, str, "os.PathLike[str]", Dict[str, Any]]


class NoCapacityError(ValueError):
    """No capacity to judge against: none given, none recorded, no CUDA device here."""


def capacity_bytes_of(value: Any, name: str = "capacity") -> int:
    """A capacity given as bytes (int) or a size (``"16GiB"``): positive, at most 2^53 - 1."""
    if isinstance(value, str):
        value = parse_size(value, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Expected a positive integer or a size such as '16GiB' for {name} but received {value!r} of type {type(value).__name__}")
    if not 0 < value <= 2**53 - 1:
        raise ValueError(f"{name} must be more than 0 bytes and at most 2^53 - 1 (received {value})")
    return value


def device_total(device: int = 0) -> Optional[Tuple[int, str]]:
    """This machine's CUDA device total memory and its words, through torch where it is installed
    and sees a device; None otherwise."""
    try:
        import torch  # noqa: PLC0415  # only here: the offline doctor needs no torch

        if not torch.cuda.is_available():
            return None
        props = torch.cuda.get_device_properties(device)
        return int(props.total_memory), f"the total memory of {props.name} (cuda:{device})"
    except Exception:  # no torch, no driver: no device to read
        return None


def capacity_for(given: Any, trace: _tracefile.Trace, device: int = 0) -> Tuple[int, str]:
    """The capacity and where it came from: given, else the snapshot's recorded one, else the device's total."""
    if given is not None:
        return capacity_bytes_of(given), "--capacity"
    recorded = _doctor.recorded_capacity(trace)
    if recorded is not None:
        return recorded["bytes"], recorded["source"]
    total = device_total(device)
    if total is not None:
        return total
    raise NoCapacityError(
        "no capacity to judge against: the trace records none (a PyTorch snapshot taken at an OOM does) and there is "
        "no CUDA device here; give a capacity, e.g. --capacity 80GiB or capacity='80GiB'"
    )


def parse_outside(text: str, name: str = "'--outside'") -> Dict[str, Any]:
    """``SIZE`` or ``LOW..HIGH``: the device memory outside the allocator, as the verdict holds it."""
    parts = text.split("..")
    if len(parts) > 2:
        raise ValueError(f"Expected SIZE or LOW..HIGH for {name} but received '{text}'")
    low = parse_size(parts[0], name)
    high = parse_size(parts[1], name) if len(parts) == 2 else low
    if low > high:
        raise ValueError(f"{name} {text}: LOW must be at most HIGH")
    return _band.outside_memory(low, high, f"--outside {text}")


def outside_for(given: Optional[Dict[str, Any]], capacity_given: bool, trace: _tracefile.Trace, capacity_source: str) -> Dict[str, Any]:
    """The memory outside the allocator to count: given; none where the capacity is the snapshot's own
    (reserved plus the driver's free: what the allocator could have had); else the default."""
    if given is not None:
        return given
    if not capacity_given and _doctor.recorded_capacity(trace) is not None:
        return _band.outside_memory(0, 0, f"none counted: the capacity is {capacity_source}, what the allocator could have had")
    return dict(_band.DEFAULT_OUTSIDE)


def doctor(snapshot: Snapshot = None, capacity: Any = None, device: Optional[int] = None, resolution: Any = None,
           skip_failed_requests: bool = False, outside: Any = None, model_error: Optional[float] = None) -> Dict[str, Any]:  # fmt: skip
    """Is this OOM real? The verdict of ``gpumem doctor --json`` as a dict (``file``, ``trace``,
    ``capacitySource``, ``verdict``: ``verdict["kind"]`` is 'fits', 'fragmentation' or 'real',
    ``verdict["lines"]`` says it in words).

    snapshot: a snapshot or trace file (a pickle from ``torch.cuda.memory._dump_snapshot()``, or a
    gpumem JSONL trace, optionally gzip-compressed), a snapshot dict, or None for this process's own
    (``torch.cuda.memory._snapshot()``, with history recorded by
    ``torch.cuda.memory._record_memory_history()``). capacity: bytes or a size ('16GiB'); None: the
    snapshot's recorded capacity (at its first out-of-memory entry), else the device's total memory.
    outside: the device memory outside the allocator, a size or ``"LOW..HIGH"`` (default 0-250
    MiB; none where the capacity is the snapshot's own); model_error: the PyTorch model's relative
    error (default 0.004, and 4 MiB at the least). Raises TraceFormatError for a malformed file or a snapshot without
    history, NoCapacityError where there is no capacity, ValueError/TypeError for bad arguments."""
    if snapshot is None:
        import torch  # noqa: PLC0415

        snapshot = torch.cuda.memory._snapshot()
    if isinstance(snapshot, dict):
        file = "<torch.cuda.memory._snapshot()>"
        trace = _snapshot.snapshot_trace(snapshot, device)
    elif isinstance(snapshot, (str, os.PathLike)):
        file = os.fspath(snapshot)
        trace = _tracefile.read_trace(file, device)
    else:
        raise TypeError(f"Expected a file path, a snapshot dict or None for snapshot but received {type(snapshot).__name__}")
    bytes_, source = capacity_for(capacity, trace, 0 if device is None else device)
    resolution_bytes = None if resolution is None else capacity_bytes_of(resolution, "resolution")
    outside_memory = outside_for(None if outside is None else parse_outside(str(outside), "outside"), capacity is not None, trace, source)
    error = _band.DEFAULT_PYTORCH_MODEL_ERROR if model_error is None else model_error
    verdict = _doctor.diagnose_oom(trace, bytes_, resolution_bytes, "skip" if skip_failed_requests else "replay", outside=outside_memory,
                                   pytorch_model_error=error)  # fmt: skip
    return {"file": file, "trace": {"format": trace.format, "origin": _doctor.origin_of(trace), "events": len(trace.events)},
            "capacitySource": source, "verdict": verdict}  # fmt: skip
