"""The doctor's honest boundaries (a port of packages/trace/src/doctor-band.ts): a need replayed on
the host is not yet what a device must have. The program also holds memory outside its allocator
(the CUDA context's growth, cuBLAS handles and workspaces, NCCL, the driver's reserve), known only
as a range, and a strategy that stands for another allocator (the model of PyTorch's) errs by a
fraction of the need. A band around each need holds both; a capacity inside the band of the need
that decides is too close to call. Only the standard library."""

from __future__ import annotations

import math
from typing import Any, Dict

MIB = 1024 * 1024

# Measured on H200s, PyTorch 2.11: gpumem's strategies under a cudaMalloc ballast ran out of memory
# 0 to 250 MiB above the need their replay found, by program (doctor-band.ts, defaultOutsideMemory).
DEFAULT_OUTSIDE: Dict[str, Any] = {
    "lowBytes": 0,
    "highBytes": 250 * MIB,
    "source": "the default, measured on H200s, PyTorch 2.11: 0–250 MiB (gpumem's strategies under a cudaMalloc ballast ran out that far above their replayed need, by program)",
}
# The model of PyTorch's caching allocator (its twin) errs by ±0.4%, and 4 MiB at the least (H200s,
# PyTorch 2.11: doctor-band.ts, defaultPytorchModelError); gpumem's strategies by nothing: their
# replay runs their own code.
DEFAULT_PYTORCH_MODEL_ERROR = 0.004
DEFAULT_PYTORCH_MODEL_ERROR_FLOOR_BYTES = 4 * MIB
DEFAULT_STRATEGY_MODEL_ERROR = 0


def outside_memory(low: int, high: int, source: str) -> Dict[str, Any]:
    """The memory outside the allocator as the verdict's JSON holds it."""
    return {"lowBytes": low, "highBytes": high, "source": source}


def check_outside(outside: Dict[str, Any]) -> None:
    for name in ("lowBytes", "highBytes"):
        v = outside.get(name)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 2**53 - 1:
            raise ValueError(f"Expected a non-negative integer for outside.{name} but received {v!r}")
    if outside["lowBytes"] > outside["highBytes"]:
        raise ValueError(f"Expected outside.lowBytes <= outside.highBytes but received {outside['lowBytes']} and {outside['highBytes']}")


def check_relative_error(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value < 1:
        raise ValueError(f"Expected a number from 0 to less than 1 for {name} but received {value!r}")


def need_band(need_bytes: int, search_gap_bytes: int, relative_error: float, outside: Dict[str, Any],
              error_floor_bytes: int = 0) -> Dict[str, int]:
    """The band of ``need_bytes``, replayed within ``search_gap_bytes``, by a model erring by
    ``relative_error`` of the need and ``error_floor_bytes`` at the least."""
    model_error = max(math.ceil(need_bytes * relative_error), error_floor_bytes)
    return {
        "needBytes": need_bytes,
        "lowBytes": max(0, need_bytes - search_gap_bytes - model_error) + outside["lowBytes"],
        "highBytes": need_bytes + model_error + outside["highBytes"],
        "outsideLowBytes": outside["lowBytes"],
        "outsideHighBytes": outside["highBytes"],
        "modelErrorBytes": model_error,
        "searchGapBytes": search_gap_bytes,
    }


def band_call(band: Dict[str, int], capacity_bytes: int) -> str:
    """'fits' when the capacity covers the band's top, 'does-not-fit' under its bottom, else 'too-close'."""
    if capacity_bytes >= band["highBytes"]:
        return "fits"
    return "does-not-fit" if capacity_bytes < band["lowBytes"] else "too-close"


def band_margin(band: Dict[str, int], capacity_bytes: int) -> int:
    """The capacity less the band's middle (Math.round: halves up)."""
    return capacity_bytes - math.floor((band["lowBytes"] + band["highBytes"]) / 2 + 0.5)
