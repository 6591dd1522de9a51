"""The library's statistics as dicts, keyed like torch.cuda.memory_stats() where the meaning is the
same; torch's keys for figures the library does not keep are left out (gpumem_torch.memory_stats
lists them), never filled with another figure."""

from __future__ import annotations

import collections
import ctypes
from typing import Any, Dict

from . import _library


def device_index(device: Any) -> int:
    if device is None:
        try:
            import sys

            torch = sys.modules.get("torch")  # never import PyTorch just for this
            if torch is not None and torch.cuda.is_initialized():
                return torch.cuda.current_device()
        except Exception:  # noqa: BLE001
            pass
        return 0
    if isinstance(device, bool):
        pass
    elif isinstance(device, int):
        return device
    elif isinstance(device, str):
        if device == "cuda":
            return device_index(None)
        if device.startswith("cuda:") and device[5:].isdigit():
            return int(device[5:])
    elif getattr(device, "type", None) == "cuda":  # torch.device
        return device_index(None) if device.index is None else int(device.index)
    raise ValueError(f"gpumem: expected a CUDA device (int, 'cuda:N' or torch.device) but received {device!r}")


def instance_raw_stats(instance: int, device: Any = None) -> Dict[str, int]:
    lib = _library.load()
    s = _library.Stats()
    rc = lib.gpumem_instance_stats(instance, device_index(device), ctypes.byref(s))
    if rc != 0:
        raise ValueError(_library.last_error())
    return {name: int(getattr(s, name)) for name, _ in _library.Stats._fields_}


def instance_memory_stats(instance: int, device: Any = None) -> "collections.OrderedDict[str, int]":
    s = instance_raw_stats(instance, device)
    out = {
        "allocated_bytes.all.current": s["allocated_bytes"],
        "allocated_bytes.all.peak": s["peak_allocated_bytes"],
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
    if s["host_allocated_bytes"] >= 0:  # tiered: the host tier's part
        out["gpumem.host_allocated_bytes.current"] = s["host_allocated_bytes"]
        out["gpumem.host_allocated_bytes.peak"] = s["peak_host_allocated_bytes"]
        out["gpumem.host_reserved_bytes.current"] = s["host_reserved_bytes"]
    if not _library.load().gpumem_instance_config(instance).decode().startswith("strategy=async"):
        out["segment.all.current"] = s["segment_count"]
    return collections.OrderedDict(sorted(out.items()))
