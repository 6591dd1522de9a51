"""The report on the last out-of-memory failure (``gpumem_last_oom_report``, native/src/torch/oom_report.hpp):
the failure's figures, the verdict (``"real"``, ``"fragmentation"`` or ``"unknown"``, the words of
``gpumem doctor``) and the replay of the recent events on other strategies.

Only the standard library: this module is imported where PyTorch is not installed."""

from __future__ import annotations

import ctypes
import json
import re
from typing import Any, Dict, Optional

from . import _library


def _snake(name: str) -> str:
    """requestBytes -> request_bytes."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def parse_oom_report(text: str) -> Dict[str, Any]:
    """The library's JSON report as a dict with snake_case keys (``strategies`` a list of dicts in the
    same form). ValueError when ``text`` is not a JSON object."""
    report = json.loads(text)
    if not isinstance(report, dict):
        raise ValueError(f"gpumem: expected an out-of-memory report as a JSON object but received {text[:80]!r}")
    out = {_snake(k): v for k, v in report.items()}
    out["strategies"] = [{_snake(k): v for k, v in s.items()} for s in out.get("strategies", [])]
    return out


def last_oom_report() -> Optional[Dict[str, Any]]:
    """The report on the process's last out-of-memory failure under gpumem (any allocator, any device),
    or None when no allocation has failed yet. Keys: ``strategy``, ``instance``, ``device``,
    ``request_bytes``, ``live_bytes``, ``reserved_bytes``, ``largest_free_block`` (None where the
    strategy does not say), ``capacity_bytes`` and ``capacity_source`` (None where not known),
    ``verdict``, ``window`` (GPUMEM_OOM_WINDOW), ``time_bound_ms`` (GPUMEM_OOM_REPLAY_MS),
    ``recorded_events``, ``replayed``, ``skip_reason`` (None when it replayed), ``window_events``,
    ``live_blocks``, ``live_block_bytes``, ``replay_ms``, ``strategies`` (each: ``strategy``,
    ``finished``, ``fits``, ``request_fits``, ``ooms``, ``peak_reserved_bytes``, ``error``),
    ``not_replayed`` (why) and ``text`` (what the message says after its figures). RuntimeError when
    the library is older than the report."""
    lib = _library.load()
    if not hasattr(lib, "gpumem_last_oom_report"):
        raise RuntimeError(f"gpumem: {_library.loaded_path()} has no out-of-memory report; rebuild it")
    fn = lib.gpumem_last_oom_report
    fn.restype = ctypes.c_char_p
    fn.argtypes = []
    text = fn()
    if text is None:
        return None
    return parse_oom_report(text.decode("utf-8", "replace"))
