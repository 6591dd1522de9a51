"""The readers' budget on decoded work, as packages/trace/src/formats/budget.ts sets it: the events
a trace may hold (GPUMEM_TRACE_MAX_EVENTS, default 2^22: a JSONL event, a snapshot's history entry),
and a snapshot history no denser than one entry per 16 bytes of pickle (denser is one entry
referenced many times by DUP or BINGET). Past the first is a TraceBudgetError naming the file, the
limit and the setting; the second a TraceFormatError, in the TypeScript reader's words.

The TypeScript unpickler also counts the values a pickle decodes (16 an event); Python's runs in C
and cannot be stopped midway, so here the pickle's size bounds it (_snapshot.MAX_PICKLE_BYTES): a
reference costs the unpickler a pointer for a byte or two of pickle, as any value does, and the
amplification, an event built for each reference, is refused before any event is built. Only the
standard library."""

from __future__ import annotations

import os
import re
from typing import Mapping, Optional

from ._tracefile import TraceFormatError

MAX_TRACE_EVENTS_VARIABLE = "GPUMEM_TRACE_MAX_EVENTS"
DEFAULT_MAX_TRACE_EVENTS = 2**22
PICKLE_VALUES_PER_EVENT = 16
MIN_SNAPSHOT_BYTES_PER_ENTRY = 16


class TraceBudgetError(TraceFormatError):
    """Decoded work past the readers' budget (TraceBudgetError of @gpumem/trace)."""

    code = "ERR_TRACE_BUDGET"

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


def raise_budget_hint(max_events: int) -> str:
    return (
        f"a real trace this large reads with {MAX_TRACE_EVENTS_VARIABLE}={min(max_events * 4, 2**53 - 1)} "
        "(or readTrace's maxEvents option) and memory to match"
    )


def max_trace_events(max_events: Optional[int] = None, env: Optional[Mapping[str, str]] = None) -> int:
    """``max_events`` when given, else GPUMEM_TRACE_MAX_EVENTS when set, else the default; ValueError
    for a setting that is not a positive integer."""
    if max_events is not None:
        if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1 or max_events > 2**53 - 1:
            raise ValueError(f"Expected a positive integer for max_events but received {max_events!r}")
        return max_events
    text = (os.environ if env is None else env).get(MAX_TRACE_EVENTS_VARIABLE, "")
    if text == "":
        return DEFAULT_MAX_TRACE_EVENTS
    if not re.fullmatch(r"[1-9][0-9]*", text) or int(text) > 2**53 - 1:
        raise ValueError(
            f"{MAX_TRACE_EVENTS_VARIABLE} must be a positive integer (events a trace may hold; default {DEFAULT_MAX_TRACE_EVENTS}), "
            f"but it is {text[:40]!r}"
        )
    return int(text)
