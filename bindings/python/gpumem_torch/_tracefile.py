"""Reading a trace file for the doctor: a PyTorch memory snapshot (a pickle, _snapshot.py) or a
gpumem JSONL trace, each optionally compressed, as packages/trace/src/io.ts and formats/jsonl.ts
read them. A trace is a header dict and a list of events ``(time_ns, action, ptr, bytes, stream,
tag, reserved_bytes)``, action one of "alloc", "free", "oom" (reserved_bytes None where unknown).

Bounded as the TypeScript reader is: a compressed file decompresses to at most
MAX_DECOMPRESSED_BYTES; gzip through the standard library; zstd through ``compression.zstd``
(Python 3.14) or the ``zstandard`` package where one is importable, else a TraceFormatError saying
so. Only the standard library."""

from __future__ import annotations

import json
import zlib
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

MAX_DECOMPRESSED_BYTES = 2**31
MAX_SAFE = 2**53 - 1
MAX_BLANK_LINES = 1 << 20
TRACE_FORMAT_MARKER = "gpumem-trace"
TRACE_FORMAT_VERSION = 1

Event = Tuple[int, str, int, int, int, int, Optional[int]]


class TraceFormatError(ValueError):
    """A file that is not a readable trace: the message names the file and where in it."""


class Trace(NamedTuple):
    format: str  # "jsonl" or "torch-snapshot"
    header: Dict[str, Any]  # source, allocator?, device?, createdAt?, tags?, snapshot? (details)
    events: List[Event]
    pytorch: Optional[Dict[str, Any]] = None  # snapshots: PyTorch's allocator as recorded


_MAGIC = (
    ("gzip", b"\x1f\x8b", "gzip -d"),
    ("zstd", b"\x28\xb5\x2f\xfd", "zstd -d"),
    ("xz", b"\xfd7zXZ\x00", "xz -d"),
    ("bzip2", b"BZh", "bzip2 -d"),
    ("zip", b"PK\x03\x04", "unzip"),
)


def _gunzip(data: bytes, file: str, cap: int) -> bytes:
    out = bytearray()
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        rest = data
        while rest:
            out += d.decompress(rest, cap + 1 - len(out))
            if len(out) > cap:
                raise TraceFormatError(f"{file}: gzip: decompresses to more than {cap} bytes")
            rest = d.unconsumed_tail
            if d.eof:
                break
        if not d.eof:
            raise TraceFormatError(f"{file}: gzip: not a valid gzip stream (unexpected end of file)")
    except zlib.error as e:
        raise TraceFormatError(f"{file}: gzip: not a valid gzip stream ({e})") from None
    return bytes(out)


def _unzstd(data: bytes, file: str, cap: int) -> bytes:
    try:
        from compression import zstd  # type: ignore[import-not-found]  # Python 3.14 and later

        d: Any = zstd.ZstdDecompressor()
        out = d.decompress(data, max_length=cap + 1)
    except ImportError:
        try:
            import zstandard  # type: ignore[import-not-found]
        except ImportError:
            raise TraceFormatError(
                f"{file}: zstd-compressed, and this Python has no zstd decompressor (the standard library has one "
                "from Python 3.14; or pip install zstandard); decompress it first: zstd -d FILE"
            ) from None
        try:
            out = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        except zstandard.ZstdError as e:
            raise TraceFormatError(f"{file}: zstd: not a valid zstd stream ({e})") from None
    except Exception as e:  # compression.zstd.ZstdError and friends
        raise TraceFormatError(f"{file}: zstd: not a valid zstd stream ({e})") from None
    if len(out) > cap:
        raise TraceFormatError(f"{file}: zstd: decompresses to more than {cap} bytes")
    return bytes(out)


def decompress(data: bytes, file: str, cap: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """``data`` decompressed where its first bytes say it is compressed (gzip, zstd), else as it is."""
    for name, magic, command in _MAGIC:
        if data.startswith(magic):
            if name == "gzip":
                return _gunzip(data, file, cap)
            if name == "zstd":
                return _unzstd(data, file, cap)
            raise TraceFormatError(f"{file}: {name}-compressed, which this reader does not read; decompress it first: {command} FILE")
    return data


def _preview(value: Any) -> str:
    text = json.dumps(value) if value is not None else "null"
    return text if len(text) <= 80 else text[:79] + "…"


def _count(value: Any, name: str, line: int, file: str, what: str = "field") -> int:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()
    if not ok or value < 0 or value > MAX_SAFE:
        why = " (larger than 2^53 - 1)" if ok and value > MAX_SAFE else ""
        raise TraceFormatError(
            f'{file}:{line}: {what} "{name}" must be a non-negative integer up to 2^53 - 1 (received {_preview(value)}){why}'
        )
    return int(value)


def read_jsonl(text: str, file: str) -> Trace:
    """A gpumem JSONL trace: a header line, then one event object per line."""
    expected = f'expected a gpumem trace header ({{"format":"{TRACE_FORMAT_MARKER}","version":{TRACE_FORMAT_VERSION},...}})'
    header: Dict[str, Any] = {"source": "unknown"}
    tag_of: Optional[List[int]] = None
    announced: Optional[int] = None
    events: List[Event] = []
    blank = 0
    n = 0
    for n, raw in enumerate(text.split("\n"), start=1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if n == 1:
            line = line[1:] if line.startswith("\ufeff") else line
            try:
                h = json.loads(line)
            except (ValueError, RecursionError) as e:  # RecursionError: nested too deeply for the parser
                raise TraceFormatError(f"{file}:{n}: {expected} but the header is not valid JSON ({e})") from None
            if not isinstance(h, dict):
                raise TraceFormatError(f"{file}:{n}: {expected} but received {_preview(h)}")
            if h.get("format") != TRACE_FORMAT_MARKER:
                raise TraceFormatError(f'{file}:{n}: {expected} but "format" is {_preview(h.get("format"))}')
            if h.get("version") != TRACE_FORMAT_VERSION or isinstance(h.get("version"), bool):
                raise TraceFormatError(f"{file}:{n}: trace version {_preview(h.get('version'))} is not supported; this reader reads version 1")
            for key in ("source", "allocator", "device", "createdAt"):
                if key in h and not isinstance(h[key], str):
                    raise TraceFormatError(f'{file}:{n}: header field "{key}" must be a string (received {_preview(h[key])})')
                if key in h:
                    header[key] = h[key]
            if "tags" in h:
                tags = h["tags"]
                if not isinstance(tags, list) or any(not isinstance(t, str) for t in tags):
                    raise TraceFormatError(f'{file}:{n}: header field "tags" must be an array of strings (received {_preview(tags)})')
                distinct = list(dict.fromkeys(tags))
                if len(distinct) != len(tags):  # tags that share a name are one tag
                    index = {name: k for k, name in enumerate(distinct)}
                    tag_of = [index[name] for name in tags]
                header["tags"] = distinct
            if "eventCount" in h:
                announced = _count(h["eventCount"], "eventCount", n, file, "header field")
            continue
        if line.strip() == "":
            blank += 1
            if blank > MAX_BLANK_LINES:
                raise TraceFormatError(f"{file}:{n}: more than {MAX_BLANK_LINES} blank lines: not a trace file")
            continue
        try:
            o = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise TraceFormatError(f"{file}:{n}: not a JSON event object ({e}); truncated line?") from None
        if not isinstance(o, dict):
            raise TraceFormatError(f"{file}:{n}: expected a JSON event object but received {line[:80]}")
        action = o.get("action")
        if action not in ("alloc", "free", "oom"):
            raise TraceFormatError(f'{file}:{n}: "action" must be one of "alloc", "free", "oom" (received {_preview(action)})')
        for key in ("timeNs", "ptr", "bytes"):
            if key not in o:
                raise TraceFormatError(f'{file}:{n}: the event has no "{key}" field')
        tag = _count(o["tag"], "tag", n, file) if "tag" in o else 0
        if tag > 0xFFFFFFFF:
            raise TraceFormatError(f'{file}:{n}: "tag" must fit in 32 bits (received {tag})')
        if tag_of is not None:
            tag = tag_of[min(tag, len(tag_of) - 1)]
        ptr = _count(o["ptr"], "ptr", n, file)
        size = _count(o["bytes"], "bytes", n, file)
        if ptr == 0 and size > 0 and action != "oom":
            raise TraceFormatError(f"{file}:{n}: {'an allocation' if action == 'alloc' else 'a free'} of {size} bytes has a null pointer")
        reserved = _count(o["reservedBytes"], "reservedBytes", n, file) if "reservedBytes" in o else None
        stream = _count(o["stream"], "stream", n, file) if "stream" in o else 0
        events.append((_count(o["timeNs"], "timeNs", n, file), action, ptr, size, stream, tag, reserved))
    if n == 0 or (n == 1 and text.strip() == ""):
        raise TraceFormatError(f"{file}: the file is empty: {expected}")
    if announced is not None and announced != len(events):
        short = " (truncated?)" if len(events) < announced else ""
        raise TraceFormatError(f"{file}:{n + 1}: the header announces {announced} events but the file holds {len(events)}{short}")
    return Trace("jsonl", header, events)


def read_trace(path: str, device: Optional[int] = None, max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES) -> Trace:
    """The trace in ``path``: a PyTorch snapshot (pickle) or a gpumem JSONL trace, compressed or not.
    OSError where the file cannot be read; TraceFormatError for anything malformed."""
    from . import _snapshot

    with open(path, "rb") as f:
        data = f.read(max_decompressed_bytes + 1)
    if len(data) > max_decompressed_bytes:
        raise TraceFormatError(f"{path}: larger than {max_decompressed_bytes} bytes")
    data = decompress(data, path, max_decompressed_bytes)
    if data[:1] == b"\x80":  # a pickle's PROTO opcode: what torch.cuda.memory._dump_snapshot() writes
        return _snapshot.parse_snapshot(data, path, device)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceFormatError(f"{path}: neither a PyTorch snapshot (pickle) nor a gpumem JSONL trace (not UTF-8 text: {e.reason})") from None
    if not text.lstrip("\ufeff").lstrip().startswith("{"):
        raise TraceFormatError(f"{path}: neither a PyTorch snapshot (pickle) nor a gpumem JSONL trace (its first line is not a JSON object)")
    return read_jsonl(text, path)
