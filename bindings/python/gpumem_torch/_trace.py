"""A trace compiled for replay, and what its allocations and frees alone say: the peak of live
bytes, and what holds the memory at that peak (by tag, stream, size class; tags or streams kept off
the device; idle tags asleep; the bytes live only around the peak). Ports of packages/trace/src/
replay.ts (compileTrace, peakByTag) and peak-anatomy.ts, figure for figure: the doctor's JSON must
read the same from Python as from gpumem doctor. Only the standard library."""

from __future__ import annotations

from array import array
from itertools import accumulate
from typing import Dict, List, NamedTuple, Optional, Sequence

from ._tracefile import Event


class CompiledTrace(NamedTuple):
    """Per operation (allocations and frees that are replayed): action (0 allocate, 1 free), the
    slot filled or emptied, bytes (a free carries its allocation's), an index into stream_ids, the
    allocation's tag; ``live_after``: the live bytes after each operation. Slots are reused once freed."""

    action: array
    slot: array
    bytes: array
    stream_index: array
    tag: array
    tag_names: Optional[List[str]]
    stream_ids: List[int]
    slots: int
    peak_allocated_bytes: int
    largest_request_bytes: int
    delta: List[int]  # per operation: +bytes for an allocation, -bytes for a free
    live_after: List[int]


def compile_trace(events: Sequence[Event], tags: Optional[List[str]]) -> CompiledTrace:
    """compileTrace: events in the order given; pointers matched first in, first out; frees of
    pointers never allocated, 0-byte events and the recording's oom events are skipped."""
    action, slot, size_of, stream_index, tag = array("B"), array("L"), array("Q"), array("L"), array("L")
    stream_ids: List[int] = []
    stream_of: Dict[int, int] = {}
    live: Dict[int, List[int]] = {}
    slot_bytes: List[int] = []
    slot_tag: List[int] = []
    free_slots: List[int] = []
    live_bytes = peak = largest = 0
    for _, act, ptr, nbytes, stream, etag, _ in events:
        if act == "oom" or nbytes == 0:
            continue
        if act == "alloc":
            s = free_slots.pop() if free_slots else len(slot_bytes)
            if s == len(slot_bytes):
                slot_bytes.append(nbytes)
                slot_tag.append(etag)
            else:
                slot_bytes[s] = nbytes
                slot_tag[s] = etag
            queue = live.get(ptr)
            if queue is None:
                live[ptr] = [s]
            else:
                queue.append(s)
            live_bytes += nbytes
            if live_bytes > peak:
                peak = live_bytes
            if nbytes > largest:
                largest = nbytes
            action.append(0)
        else:
            queue = live.get(ptr)
            if queue is None:
                continue
            s = queue.pop(0)
            if not queue:
                del live[ptr]
            live_bytes -= slot_bytes[s]
            free_slots.append(s)
            action.append(1)
        si = stream_of.get(stream)
        if si is None:
            si = stream_of[stream] = len(stream_ids)
            stream_ids.append(stream)
        slot.append(s)
        size_of.append(slot_bytes[s])
        stream_index.append(si)
        tag.append(slot_tag[s])
    delta = [b if a == 0 else -b for a, b in zip(action, size_of)]
    return CompiledTrace(action, slot, size_of, stream_index, tag, list(tags) if tags else None, stream_ids, len(slot_bytes), peak,
                         largest, delta, list(accumulate(delta)))  # fmt: skip


def live_peak(events: Sequence[Event], held_before: int) -> int:
    """The peak of live bytes from ``held_before`` on: a free of a pointer never allocated frees part
    of what was held before (a snapshot), or with nothing held is skipped (livePeak of doctor.ts)."""
    live: Dict[int, int] = {}
    now = peak = held_before
    for _, act, ptr, nbytes, _, _, _ in events:
        if act == "alloc":
            live[ptr] = live.get(ptr, 0) + 1
            now += nbytes
            if now > peak:
                peak = now
        elif act == "free":
            n = live.get(ptr, 0)
            if n > 0:
                if n == 1:
                    del live[ptr]
                else:
                    live[ptr] = n - 1
                now -= nbytes
            elif held_before > 0:
                now = max(0, now - nbytes)
    return peak


def _first_max(values: List[int]) -> int:
    """The index of the first largest value; -1 for none."""
    return values.index(max(values)) if values else -1


def peak_by_tag(c: CompiledTrace) -> List[Dict[str, object]]:
    """The bytes live at the first moment of peak by tag name, largest first (peakByTag)."""
    names = c.tag_names
    if not names:
        return []
    at_peak = [0] * len(names)
    last = len(names) - 1
    for i in range(_first_max(c.live_after) + 1):
        at_peak[min(c.tag[i], last)] += c.delta[i]
    shares = [{"tag": name, "bytes": at_peak[k]} for k, name in enumerate(names) if at_peak[k] > 0]
    return sorted(shares, key=lambda s: -s["bytes"])  # type: ignore[operator]


_SIZE_CLASSES = (
    ("< 1 MiB", 2**20),
    ("1 MiB to 16 MiB", 2**24),
    ("16 MiB to 256 MiB", 2**28),
    ("256 MiB to 1 GiB", 2**30),
    (">= 1 GiB", float("inf")),
)


def peak_op(c: CompiledTrace) -> int:
    """The operation after which live bytes first reach their peak; -1 with no allocation."""
    at = _first_max(c.live_after)
    return at if at >= 0 and c.live_after[at] > 0 else -1


def _live_slots_after(c: CompiledTrace, at: int) -> List[int]:
    alloc_op = [-1] * c.slots
    for i in range(at + 1):
        alloc_op[c.slot[i]] = i if c.action[i] == 0 else -1
    return alloc_op


def _peak_without(c: CompiledTrace, skip) -> int:  # type: ignore[no-untyped-def]
    skipped = bytearray(c.slots)
    live = peak = 0
    for i in range(len(c.action)):
        s = c.slot[i]
        if c.action[i] == 0:
            skipped[s] = 1 if skip(i) else 0
            if not skipped[s]:
                live += c.bytes[i]
        elif not skipped[s]:
            live -= c.bytes[i]
        peak = max(peak, live)
    return peak


def _shares_at_peak(c: CompiledTrace, key_of) -> List[Dict[str, object]]:  # type: ignore[no-untyped-def]
    by_key: Dict[str, int] = {}
    for op in _live_slots_after(c, peak_op(c)):
        if op >= 0:
            k = key_of(op)
            by_key[k] = by_key.get(k, 0) + c.bytes[op]
    shares = [{"name": k, "bytes": v} for k, v in by_key.items() if v > 0]
    return sorted(shares, key=lambda s: -s["bytes"])  # type: ignore[operator]


def _tag_name(c: CompiledTrace, tag: int) -> str:
    return c.tag_names[min(tag, len(c.tag_names) - 1)] if c.tag_names else f"tag {tag}"


def peak_by_stream(c: CompiledTrace) -> List[Dict[str, object]]:
    return _shares_at_peak(c, lambda op: f"stream {c.stream_ids[c.stream_index[op]]}")


def peak_by_size_class(c: CompiledTrace) -> List[Dict[str, object]]:
    return _shares_at_peak(c, lambda op: next(name for name, below in _SIZE_CLASSES if c.bytes[op] < below))


def off_device_plan(c: CompiledTrace, by: str, target_bytes: int, keep: Sequence[str] = ()) -> Optional[Dict[str, object]]:
    """Tags (by 'tag') or streams off the device, largest at the peak first, until the live bytes
    left peak at the target or every group but one is taken (offDevicePlan)."""
    if by == "tag":
        name_of = lambda op: _tag_name(c, c.tag[op])  # noqa: E731
    else:
        name_of = lambda op: f"stream {c.stream_ids[c.stream_index[op]]}"  # noqa: E731
    shares = _shares_at_peak(c, name_of)
    movable = [s for s in shares if s["name"] not in keep]
    if len(shares) < 2 or not movable:
        return None
    moved: List[str] = []
    plan: Optional[Dict[str, object]] = None
    for share in movable[: len(shares) - 1]:
        moved.append(share["name"])  # type: ignore[arg-type]
        moved_set = set(moved)
        peak = _peak_without(c, lambda op: name_of(op) in moved_set)
        plan = {
            "groups": list(moved),
            "movedAtPeakBytes": (plan["movedAtPeakBytes"] if plan else 0) + share["bytes"],  # type: ignore[operator]
            "peakBytes": peak,
            "reaches": peak <= target_bytes,
        }
        if plan["reaches"]:
            break
    return plan


def idle_tags_above(c: CompiledTrace, target_bytes: int) -> Optional[Dict[str, object]]:
    """Tags that hold memory but make no call while live bytes exceed the target (idleTagsAbove)."""
    names = c.tag_names
    if not names:
        return None
    tags = len(names)
    live_after, delta = c.live_after, c.delta
    busy = [False] * tags  # made an allocation or free above the target
    holds = set()  # held bytes above the target
    positive = set()  # tags holding bytes now
    tag_live = [0] * tags
    above = False
    for i in range(len(delta)):
        t = min(c.tag[i], tags - 1)
        # an operation that enters, leaves or happens inside a stretch above the target belongs to it
        if live_after[i] > target_bytes or above:
            busy[t] = True
        tag_live[t] += delta[i]
        if tag_live[t] > 0:
            positive.add(t)
        else:
            positive.discard(t)
        above = live_after[i] > target_bytes
        if above:
            holds |= positive
    idle = [k for k in range(tags) if k in holds and not busy[k]]
    if not holds:
        return None
    # over the stretches, the idle tags' bytes are constant (they make no call there): subtract them
    asleep = set(idle)
    peak = sleeping = 0
    for i in range(len(delta)):
        t = min(c.tag[i], tags - 1)
        if t in asleep:
            sleeping += delta[i]
        peak = max(peak, live_after[i] - sleeping if live_after[i] > target_bytes else live_after[i])
    at_peak = {int(s["name"]): s["bytes"] for s in _shares_at_peak(c, lambda op: str(min(c.tag[op], tags - 1)))}  # type: ignore[call-overload]
    return {"tags": [names[k] for k in idle], "heldAtPeakBytes": sum(at_peak.get(k, 0) for k in idle), "peakBytes": peak}


def _teardown_start(c: CompiledTrace, after: int, floor_bytes: int) -> int:
    """Where the trace's teardown begins (teardownStart): the earlier of the first operation after the
    last allocation and the start of the final descent under ``floor_bytes`` (the step boundary's
    live bytes); the number of operations where it has none."""
    n = len(c.action)
    last_alloc = -1
    for i in range(n - 1, -1, -1):
        if c.action[i] == 0:
            last_alloc = i
            break
    descent = n
    i = n - 1
    while i > after and c.live_after[i] < floor_bytes:
        descent = i
        i -= 1
    return min(last_alloc + 1, descent)


def transient_at_peak(c: CompiledTrace) -> Optional[Dict[str, int]]:
    """The bytes live at the peak that are the peak's own (freed later in the trace before its
    teardown, or allocated after the trough before the peak), the standing rest, and where the
    teardown begins (transientAtPeak): frees in the teardown release the program, not a step."""
    at = peak_op(c)
    if at < 0:
        return None
    slots = _live_slots_after(c, at)
    live_after = c.live_after
    half = live_after[at] / 2
    trough = -1
    for i in range(at):
        if (live_after[i] >= half) if trough < 0 else (live_after[i] <= live_after[trough]):
            trough = i
    teardown_op = _teardown_start(c, at, live_after[trough] if trough >= 0 else 0)
    freed_later = bytearray(c.slots)
    seen = bytearray(c.slots)
    for i in range(at + 1, teardown_op):
        s = c.slot[i]
        if seen[s]:
            continue
        seen[s] = 1
        if c.action[i] == 1 and slots[s] >= 0:
            freed_later[s] = 1
    transient = standing = 0
    for s in range(c.slots):
        op = slots[s]
        if op < 0:
            continue
        if freed_later[s] or op > trough:
            transient += c.bytes[op]
        else:
            standing += c.bytes[op]
    return {"bytes": transient, "standingBytes": standing, "teardownOp": teardown_op}
