"""PyTorch's memory snapshots as traces, read without PyTorch: the pickle that
``torch.cuda.memory._snapshot()`` returns and ``_dump_snapshot()`` writes, through a restricted
unpickler that constructs no object of any class (a snapshot holds only dicts, lists, tuples, str,
int, float, bool and None), turned into one device's events exactly as packages/trace/src/snapshot/
snapshot.ts does: ``alloc`` -> alloc, ``free_completed`` -> free, ``oom`` -> oom; the segment entries
and the final ``segments`` give what PyTorch reserved, and what was allocated before the history
began.

Bounded: the pickle is at most MAX_PICKLE_BYTES (every value costs at least a byte of it), the
list items visited are at most the pickle's size (a list referenced many times over is refused
rather than walked many times), and the history read is within the readers' budget (_budget.py: at
most GPUMEM_TRACE_MAX_EVENTS entries, at most one per 16 bytes of pickle). Only the standard library."""

from __future__ import annotations

import io
import math
import pickle
import re
import sys
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

from . import _budget
from ._tracefile import Event, Trace, TraceFormatError

# The largest pickle read (after decompression): PyTorch's snapshots hold a value per 3 to 4 bytes,
# a pickle of cheap opcodes one per byte; this bounds the objects built before anything is checked.
MAX_PICKLE_BYTES = 2**28
DEFAULT_MAX_FRAME_TAGS = 12
OTHER_FRAME_TAG = "other"
MAX_SAFE = 2**53 - 1
_MAX_FRAME_NAME_CHARS = 512
_MISSING = object()


class _RestrictedUnpickler(pickle.Unpickler):
    """Plain data only: every opcode that would name a class or a function (GLOBAL, STACK_GLOBAL,
    and through them REDUCE, BUILD, NEWOBJ, INST, OBJ, EXT*) reaches find_class and is refused; a
    persistent id is refused too."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: the pickle names {module}.{name} (a snapshot holds plain data only)")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused: the pickle holds a persistent id (a snapshot holds plain data only)")


def unpickle(data: bytes, file: str) -> Any:
    """The plain data pickled in ``data``; TraceFormatError for anything else or anything malformed."""
    if len(data) > MAX_PICKLE_BYTES:
        raise TraceFormatError(f"{file}: the pickle is {len(data)} bytes, more than the {MAX_PICKLE_BYTES} a snapshot is read to")
    try:
        return _RestrictedUnpickler(io.BytesIO(data), encoding="utf-8", errors="strict").load()
    except MemoryError:
        raise TraceFormatError(f"{file}: the pickle needs more memory than this machine has") from None
    except RecursionError:
        raise TraceFormatError(f"{file}: the pickle nests too deeply") from None
    except Exception as e:  # UnpicklingError, EOFError, TypeError (an unhashable key), ValueError, ...
        reason = str(e).split("\n")[0][:300] or type(e).__name__
        raise TraceFormatError(f"{file}: not a readable pickle: {reason}") from None


def type_name(value: Any) -> str:
    """The Python type of a pickled value as the TypeScript reader names it (pickleTypeName)."""
    if value is _MISSING:
        return "nothing"
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "int" if value.is_integer() else "float"
    for kind, name in ((str, "str"), ((bytes, bytearray), "bytes"), (dict, "dict"), (tuple, "tuple")):
        if isinstance(value, kind):
            return name
    return "list" if isinstance(value, list) else type(value).__name__


_INTERNAL_NATIVE = re.compile(r"\.(c|cc|cpp|cxx|cu|h|hpp|cuh|so)(\.\d+)*$")
_INTERNAL_TORCH = re.compile(r"(^|/)torch/")
_INTERNAL_STDLIB = re.compile(r"(^|/)python\d+(\.\d+)?/")


def is_internal_frame(filename: str) -> bool:
    """A frame of PyTorch, of the Python runtime, or native: not the user's (isInternalFrame)."""
    f = filename.replace("\\", "/")
    if f == "" or f == "??" or f.startswith("<"):
        return True
    if _INTERNAL_TORCH.search(f) or _INTERNAL_NATIVE.search(f):
        return True
    return bool(_INTERNAL_STDLIB.search(f)) and "/site-packages/" not in f and "/dist-packages/" not in f


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_FRAME_NAME_CHARS else "…" + text[len(text) - _MAX_FRAME_NAME_CHARS + 1 :]


def _js_round(x: float) -> int:
    """JavaScript's Math.round: halves go up."""
    return math.floor(x + 0.5)


def _iso_ms(ms: float) -> str:
    """JavaScript's new Date(ms).toISOString() (ms truncated to an integer)."""
    whole = int(ms)
    t = datetime.fromtimestamp(whole // 1000, tz=timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{whole % 1000:03d}Z"


def _js_number_text(value: Any) -> str:
    """A frame's line number as the TypeScript reader writes it (String(number)); '?' for anything
    else, and for an int past 2^53 - 1 (a bigint there)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "?"
    if isinstance(value, int):
        return str(value) if abs(value) <= MAX_SAFE else "?"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)


def _plain(value: Any, depth: int) -> Any:
    """allocator_settings as plain data, bounded as pickleToJson bounds it (depth, width): a pickle's
    shared references cannot multiply the work; deeper containers are left out."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth >= 4:
        return "…"
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else js_key(k)): _plain(v, depth + 1) for k, v in list(value.items())[:100]}
    if _list_like(value):
        return [_plain(v, depth + 1) for v in value[:100]]
    return type_name(value)


def js_key(key: Any) -> str:
    """A dict key as pickleToJson writes it (String(key) for a number or bool, else its type's name)."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, (int, float)):
        return str(int(key)) if isinstance(key, int) or (key.is_integer() and abs(key) < 1e21) else repr(key)
    return type_name(key)


def _list_like(value: Any) -> bool:
    return isinstance(value, (list, tuple))


class _Reader:
    """One snapshot turned into a trace of one device (SnapshotReader of snapshot.ts)."""

    def __init__(self, file: str, size: int, max_frame_tags: int, max_events: int = 2**53 - 1) -> None:
        self.file = file
        self.size = size
        self.max_events = max_events
        self.budget = size + 1024
        self.max_frame_tags = max_frame_tags
        self.frame_of: Dict[int, Optional[str]] = {}  # id(frames list) -> its user frame
        self.label_of: Dict[int, Optional[str]] = {}  # id(frame dict) -> its label (None: not a user frame)

    def fail(self, where: str, reason: str) -> Any:
        raise TraceFormatError(f"{self.file}: {where}: {reason}" if where else f"{self.file}: {reason}")

    def list(self, value: Any, where: str) -> Any:
        if not _list_like(value):
            self.fail(where, f"expected a list, found {type_name(value)}")
        self.budget -= len(value)
        if self.budget < 0:
            self.fail(where, "holds more items than a file of this size can (the same list referenced many times?)")
        return value

    def dict(self, value: Any, where: str) -> Dict[Any, Any]:
        if not isinstance(value, dict):
            self.fail(where, f"expected a dict, found {type_name(value)}")
        return value

    def count(self, d: Dict[Any, Any], key: str, where: str, fallback: Optional[int] = None) -> int:
        v = d.get(key, _MISSING)
        if type(v) is int and 0 <= v <= MAX_SAFE:  # the common case, first
            return v
        if v is _MISSING and fallback is not None:
            return fallback
        if v is _MISSING:
            self.fail(where, f"the entry has no '{key}'")
        if isinstance(v, int) and not isinstance(v, bool) and v > MAX_SAFE:
            self.fail(where, f"'{key}' is {v if v.bit_length() < 1000 else 'huge'}, beyond 2^53 - 1")
        ok = (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
        if not ok:
            self.fail(where, f"'{key}' must be an int, found {type_name(v)}")
        if v < 0:
            self.fail(where, f"'{key}' must not be negative (found {v if v > -MAX_SAFE else 'a huge negative int'})")
        if v > MAX_SAFE:
            self.fail(where, f"'{key}' is {v}, beyond 2^53 - 1")
        return int(v)

    def user_frame(self, e: Dict[Any, Any], at: str) -> Optional[str]:
        frames = e.get("frames")
        if not _list_like(frames) or len(frames) == 0:
            return None
        if id(frames) in self.frame_of:
            return self.frame_of[id(frames)]
        found = None
        for f in self.list(frames, f"{at}.frames"):
            if not isinstance(f, dict):
                continue
            if id(f) in self.label_of:
                label = self.label_of[id(f)]
            else:
                filename, line, name = f.get("filename"), f.get("line"), f.get("name")
                if not isinstance(filename, str) or is_internal_frame(filename):
                    label = None
                else:
                    line_text = _js_number_text(line)
                    label = f"{_clip(filename)}:{line_text}:{_clip(name) if isinstance(name, str) else '?'}"
                self.label_of[id(f)] = label
            if label is None:
                continue
            found = label
            break
        self.frame_of[id(frames)] = found
        return found

    def read(self, root: Any, wanted: Optional[int]) -> Trace:
        file = self.file
        no_history = (
            f"no allocation history in {file}{{}}: call torch.cuda.memory._record_memory_history() before running the program, "
            "then _dump_snapshot()"
        )
        if _list_like(root):
            raise TraceFormatError(no_history.format(" (it holds a list, as torch.cuda.memory_snapshot() returns: segments only)"))
        if not isinstance(root, dict):
            self.fail("", f"not a PyTorch memory snapshot: the pickle holds {type_name(root)}, expected a dict with 'segments' and 'device_traces'")
        segments_value = root.get("segments", _MISSING)
        traces_value = root.get("device_traces", _MISSING)
        if segments_value is _MISSING and traces_value is _MISSING:
            self.fail("", "not a PyTorch memory snapshot: the dict has neither 'segments' nor 'device_traces'")
        traces = [] if traces_value is _MISSING or traces_value is None else self.list(traces_value, "device_traces")
        for i, t in enumerate(traces):
            if not _list_like(t):
                self.fail(f"device_traces[{i}]", f"expected a list of entries, found {type_name(t)}")
        devices = [i for i, t in enumerate(traces) if len(t) > 0]
        if not devices:
            raise TraceFormatError(no_history.format(""))
        device = devices[0]
        if wanted is not None:
            if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 0:
                raise ValueError(f"device must be a non-negative integer (received {wanted})")
            if wanted not in devices:
                self.fail("", f"device {wanted} has no allocation history in this snapshot; devices with entries: {', '.join(map(str, devices))}")
            device = wanted
        where = f"device_traces[{device}]"
        history = traces[device]
        if len(history) > self.max_events:
            raise _budget.TraceBudgetError(
                f"{file}: {where}: more than {self.max_events} events, past the readers' budget on decoded work; "
                f"{_budget.raise_budget_hint(self.max_events)}",
                self.max_events,
            )
        # Each entry becomes an event: a history denser than PyTorch writes is one entry referenced
        # many times, which would multiply the file into memory.
        if len(history) * _budget.MIN_SNAPSHOT_BYTES_PER_ENTRY > self.size + 1024:
            self.fail(
                where,
                f"{len(history)} entries in {self.size} bytes of pickle, more than one per {_budget.MIN_SNAPSHOT_BYTES_PER_ENTRY} bytes: "
                "entries referenced many times over (PyTorch writes each entry, some 50 bytes, once), which this reader refuses",
            )
        entries = [self.dict(e, f"{where}[{i}]") for i, e in enumerate(self.list(traces[device], where))]

        timed = all("time_us" in e for e in entries)

        def time_us(e: Dict[Any, Any], i: int) -> float:
            v = e.get("time_us")
            if type(v) is float and 0 <= v < math.inf:  # the common case, first
                return v
            if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 1000:  # past a float's range
                self.fail(f"{where}[{i}]", "'time_us' must be a non-negative number, found an int beyond a float's range")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                self.fail(f"{where}[{i}]", f"'time_us' must be a non-negative number, found {type_name(v)}")
            return float(v) if isinstance(v, float) or abs(v) > MAX_SAFE else v

        t0 = time_us(entries[0], 0) if timed and entries else 0
        events: List[List[Any]] = []  # [time_ns, action, ptr, bytes, stream, tag, reserved]
        reserved_at_event: List[int] = []
        actions: Dict[str, int] = {}
        pending: Dict[int, int] = {}
        live: Dict[int, int] = {}
        last_ns = 0
        net = min_net = live_net = min_live = max_live = requested_net = max_requested = 0
        segment_allocs = segment_frees = deferred_frees = frees_before_history = 0
        frame_of_event: Dict[int, str] = {}
        frame_bytes: Dict[str, int] = {}
        first_oom: Optional[Tuple[int, int]] = None
        timeline_ns: List[int] = []
        timeline_net: List[int] = []

        for i, e in enumerate(entries):
            at = f"{where}[{i}]"
            action = e.get("action", _MISSING)
            if not isinstance(action, str):
                self.fail(at, f"'action' must be a str, found {type_name(action)}")
            actions[action] = actions.get(action, 0) + 1
            relative = _js_round((time_us(e, i) - t0) * 1000) if timed else i * 1000
            if relative > MAX_SAFE:
                self.fail(at, "'time_us' lies more than 2^53 ns (104 days) after the first entry's")
            time_ns = max(last_ns, relative)
            last_ns = time_ns
            if action == "alloc":
                ptr = self.count(e, "addr", at)
                size = self.count(e, "size", at)
                if ptr == 0 and size > 0:
                    self.fail(at, f"an allocation of {size} bytes has a null address")
                live[ptr] = live.get(ptr, 0) + 1
                frame = self.user_frame(e, at)
                if frame is not None:
                    frame_of_event[len(events)] = frame
                    frame_bytes[frame] = frame_bytes.get(frame, 0) + size
                live_net += size
                max_live = max(max_live, live_net)
                requested_net += size
                max_requested = max(max_requested, requested_net)
                events.append([time_ns, "alloc", ptr, size, self.count(e, "stream", at, 0), 0, None])
                reserved_at_event.append(net)
            elif action == "free_requested":
                ptr = self.count(e, "addr", at)
                if ptr not in pending:
                    requested_net -= self.count(e, "size", at, 0)
                pending[ptr] = i
            elif action == "free_completed":
                ptr = self.count(e, "addr", at)
                size = self.count(e, "size", at)
                if ptr == 0 and size > 0:
                    self.fail(at, f"a free of {size} bytes has a null address")
                requested = pending.pop(ptr, None)
                if requested is not None:
                    if i - requested > 1:
                        deferred_frees += 1
                else:
                    requested_net -= size
                n = live.get(ptr, 0)
                if n == 0:
                    frees_before_history += 1
                elif n == 1:
                    del live[ptr]
                else:
                    live[ptr] = n - 1
                live_net -= size
                min_live = min(min_live, live_net)
                events.append([time_ns, "free", ptr, size, self.count(e, "stream", at, 0), 0, None])
                reserved_at_event.append(net)
            elif action == "oom":
                if first_oom is None and "device_free" in e:
                    first_oom = (len(events), self.count(e, "device_free", at))
                events.append([time_ns, "oom", 0, self.count(e, "size", at), self.count(e, "stream", at, 0), 0, None])
                reserved_at_event.append(net)
            elif action in ("segment_alloc", "segment_map", "segment_free", "segment_unmap"):
                size = self.count(e, "size", at)
                grows = action in ("segment_alloc", "segment_map")
                net += size if grows else -size
                min_net = min(min_net, net)
                if grows:
                    segment_allocs += 1
                else:
                    segment_frees += 1
                timeline_ns.append(time_ns)
                timeline_net.append(net)
            # other actions ('snapshot' markers, later PyTorch's): counted, not replayed

        final_reserved: Optional[int] = None
        final_live: Optional[int] = None
        if segments_value is not _MISSING and segments_value is not None:
            final_reserved = final_live = 0
            segments = self.list(segments_value, "segments")
            for s, seg_value in enumerate(segments):
                at = f"segments[{s}]"
                seg = self.dict(seg_value, at)
                if self.count(seg, "device", at, device) != device:
                    continue
                final_reserved += self.count(seg, "total_size", at)
                blocks = seg.get("blocks", _MISSING)
                if blocks is _MISSING:
                    continue
                for b, block_value in enumerate(self.list(blocks, f"{at}.blocks")):
                    bat = f"{at}.blocks[{b}]"
                    block = self.dict(block_value, bat)
                    if block.get("state") in ("active_allocated", "active_pending_free"):
                        final_live += self.count(block, "requested_size", bat, self.count(block, "size", bat))
        reserved_before = max(0 if final_reserved is None else final_reserved - net, -min_net)
        allocated_before = max(0 if final_live is None else final_live - live_net, -min_live, 0)
        for k, ev in enumerate(events):
            ev[6] = reserved_before + reserved_at_event[k]
        reserved_timeline = [reserved_before] + [reserved_before + v for v in timeline_net]

        details: Dict[str, Any] = {
            "device": device,
            "entries": len(entries),
            "actions": actions,
            "deferredFrees": deferred_frees,
            "pendingFreesAtEnd": len(pending),
            "freesBeforeHistory": frees_before_history,
            "reservedBeforeHistoryBytes": reserved_before,
            "allocatedBeforeHistoryBytes": allocated_before,
        }
        n = len(entries)
        if n >= 1000 and (n % 1000 == 0 or (n >= 1024 and n & (n - 1) == 0)):
            details["maxEntriesHint"] = n
        if not timed:
            details["timesFromOrder"] = True
        if first_oom is not None:
            ev = events[first_oom[0]]
            details["firstOom"] = {
                "timeNs": ev[0],
                "requestedBytes": ev[3],
                "deviceFreeBytes": first_oom[1],
                "reservedBytes": ev[6] if ev[6] is not None else reserved_before,
            }
        settings = root.get("allocator_settings")
        if isinstance(settings, dict):
            details["allocatorSettings"] = _plain(settings, 0)
        header: Dict[str, Any] = {"source": "torch-snapshot", "allocator": "pytorch-cuda-caching", "device": f"cuda:{device}", "snapshot": details}
        if frame_bytes:
            details["allocationFrames"] = len(frame_bytes)
            header["tags"] = _tag_by_frame(events, frame_of_event, frame_bytes, self.max_frame_tags)
        lo = datetime(2015, 1, 1, tzinfo=timezone.utc).timestamp() * 1e6
        hi = datetime(2100, 1, 1, tzinfo=timezone.utc).timestamp() * 1e6
        if timed and lo < t0 < hi:
            header["createdAt"] = _iso_ms(t0 / 1000)
        pytorch = {
            "peakReservedBytes": max([0] + reserved_timeline),
            "peakAllocatedBytes": allocated_before + max_live,
            "peakAllocatedAtFreeRequestBytes": allocated_before + max_requested,
            "segmentAllocs": segment_allocs,
            "segmentFrees": segment_frees,
        }
        out: List[Event] = [tuple(ev) for ev in events]  # type: ignore[misc]
        return Trace("torch-snapshot", header, out, pytorch)


def _tag_by_frame(events: List[List[Any]], frame_of_event: Dict[int, str], frame_bytes: Dict[str, int], max_tags: int) -> List[str]:
    """Tags the events by their allocation's user frame: the ``max_tags`` frames that allocated the
    most bytes get 1, 2, ... in that order, every other allocation 0 ('other'); a free takes its
    allocation's tag (oldest first for a reused address). Returns the tag names."""
    kept = [frame for frame, _ in sorted(frame_bytes.items(), key=lambda kv: (-kv[1], _js_key(kv[0])))[:max_tags]]
    tag_of = {frame: k + 1 for k, frame in enumerate(kept)}
    live_tag: Dict[int, List[int]] = {}
    for k, e in enumerate(events):
        if e[1] == "alloc":
            frame = frame_of_event.get(k)
            e[5] = 0 if frame is None else tag_of.get(frame, 0)
            live_tag.setdefault(e[2], []).append(e[5])
        elif e[1] == "free":
            queue = live_tag.get(e[2])
            e[5] = queue.pop(0) if queue else 0
            if queue is not None and not queue:
                del live_tag[e[2]]
    return [OTHER_FRAME_TAG] + kept


def _js_key(text: str) -> List[int]:
    """JavaScript compares strings by UTF-16 code units: the sort key that orders them alike."""
    return list(text.encode("utf-16-be"))


def parse_snapshot(
    data: bytes,
    file: str = "<input>",
    device: Optional[int] = None,
    max_frame_tags: int = DEFAULT_MAX_FRAME_TAGS,
    max_events: Optional[int] = None,
) -> Trace:
    """A snapshot's pickle (already decompressed) as a trace of one device; TraceFormatError for
    anything malformed, for a snapshot recorded without history, for a device without entries;
    TraceBudgetError for a history of more than ``max_events`` entries (default: the readers' budget,
    GPUMEM_TRACE_MAX_EVENTS)."""
    limit = _budget.max_trace_events(max_events)
    return _Reader(file, len(data), max_frame_tags, limit).read(unpickle(data, file), device)


def snapshot_trace(snapshot: Dict[Any, Any], device: Optional[int] = None) -> Trace:
    """``torch.cuda.memory._snapshot()``'s dict, as in this process, as a trace. No item budget: the
    dict is PyTorch's own, already in memory, and its lists are walked once each (a frames list
    shared by many entries is looked at once)."""
    return _Reader("<torch.cuda.memory._snapshot()>", sys.maxsize // 2, DEFAULT_MAX_FRAME_TAGS).read(snapshot, device)
