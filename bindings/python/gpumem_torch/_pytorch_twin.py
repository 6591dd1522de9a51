"""The strategy that stands for PyTorch's caching allocator in the doctor's replays: ``caching`` (a
twin of CUDACachingAllocator), with the settings a snapshot recorded (``allocator_settings``:
expandable_segments, max_split_size, garbage_collection_threshold, roundup_power2_divisions). A
port of packages/trace/src/pytorch-twin.ts. Only the standard library."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

TWIN_NAME = "caching"
MAX_SAFE = 2**53 - 1

# What a strategy reproduces, as its TypeScript registration says (`models`, shown in its label:
# `caching (PyTorch's allocator)`); the native registry the library lists does not hold it.
MODELS = {"caching": "PyTorch's allocator"}


def strategy_label(name: str) -> str:
    """strategyLabel of @gpumem/allocator-core: the name, and what it models where it says."""
    return name if name not in MODELS else f"{name} ({MODELS[name]})"


def js_number_text(value: Any) -> str:
    """String(number) in JavaScript for the values a snapshot's settings hold."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def _safe_count(value: Any) -> bool:
    """Number.isSafeInteger(value) && value >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return float(value).is_integer() and 0 <= value <= MAX_SAFE


def _roundup_text(value: Any) -> Optional[str]:
    """PyTorch's roundup_power2_divisions ({"1": n, ...}: MiB interval -> count, or a list by power of
    two) as the twin's text, ``[1:4,2:8]``; None where it sets nothing."""
    if isinstance(value, (list, tuple)):
        entries: List[Tuple[str, Any]] = [(str(2**i), n) for i, n in enumerate(value)]
    elif isinstance(value, dict):
        entries = [(js_number_text(k) if not isinstance(k, str) else k, n) for k, n in value.items()]
    else:
        entries = []
    counts = [(k, n) for k, n in entries if re.fullmatch(r"\d+", k) and _safe_count(n)]
    if not counts or all(n == 0 for _, n in counts):
        return None
    counts.sort(key=lambda e: int(e[0]))
    return "[" + ",".join(f"{k}:{js_number_text(n)}" for k, n in counts) + "]"


def twin_options(settings: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The twin's options for PyTorch's recorded settings (none for a default run); a max_split_size
    of SIZE_MAX (-1, or past 2^53) is PyTorch's "unset"."""
    options: Dict[str, Any] = {}
    if not settings:
        return options
    if settings.get("expandable_segments") is True:
        options["expandableSegments"] = True
    split = settings.get("max_split_size")
    if not isinstance(split, bool) and isinstance(split, (int, float)) and float(split).is_integer() and 0 < split <= MAX_SAFE:
        options["maxSplitSizeBytes"] = int(split)
    gc = settings.get("garbage_collection_threshold")
    if not isinstance(gc, bool) and isinstance(gc, (int, float)) and 0 < gc < 1:
        options["garbageCollectionThreshold"] = gc
    roundup = _roundup_text(settings.get("roundup_power2_divisions"))
    if roundup is not None:
        options["roundupPower2Divisions"] = roundup
    return options


def option_text(value: Any) -> str:
    """An option's value in the text form the library's variables take (booleans as 0 or 1)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return js_number_text(value) if isinstance(value, (int, float)) else str(value)


def pytorch_twin(settings: Optional[Dict[str, Any]]) -> Tuple[str, Dict[str, Any]]:
    """The twin's label and options: ``caching (PyTorch's allocator)``, ``... with expandableSegments=true``."""
    options = twin_options(settings)
    base = strategy_label(TWIN_NAME)
    given = [f"{k}={js_number_text(v)}" for k, v in options.items()]
    return (base if not given else f"{base} with {', '.join(given)}"), options
