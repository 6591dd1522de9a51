"""Reading a trace file for the doctor: a PyTorch memory snapshot (a pickle, _snapshot.py) or a
gpumem JSONL trace, each optionally compressed, as packages/trace/src/io.ts and formats/jsonl.ts
read them. A trace is a header dict and a list of events ``(time_ns, action, ptr, bytes, stream,
tag, reserved_bytes)``, action one of "alloc", "free", "oom" (reserved_bytes None where unknown).

Bounded as the TypeScript reader is: a compressed file decompresses to at most
MAX_DECOMPRESSED_BYTES, and holds at most the readers' budget of events (_budget.py); gzip through
the standard library, every member; zstd through ``compression.zstd`` (Python 3.14) or the
``zstandard`` package where one is importable, every frame, skippable frames skipped, else a
TraceFormatError saying so; bytes after the last member or frame are refused. The path is a regular
file, or ``-`` for standard input: a FIFO or a device is refused before it is read. Only the
standard library."""

from __future__ import annotations

import json
import os
import stat
import sys
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


class TraceFileError(TraceFormatError):
    """A path that cannot be read as a trace at all (a FIFO, a device, a socket, a directory), as
    TraceFileError of @gpumem/trace; ``code`` is ``ERR_TRACE_NOT_FILE``."""

    code = "ERR_TRACE_NOT_FILE"


class Trace(NamedTuple):
    format: str  # "jsonl" or "torch-snapshot"
    header: Dict[str, Any]  # source, allocator?, device?, createdAt?, tags?, snapshot? (details)
    events: List[Event]
    pytorch: Optional[Dict[str, Any]] = None  # snapshots: PyTorch's allocator as recorded


_MAGIC = (
    ("gzip", b"\x1f\x8b", "gzip -d"),
    ("zstd", b"\x28\xb5\x2f\xfd", "zstd -d"),
    ("zstd", b"\x50\x2a\x4d\x18", "zstd -d"),  # a skippable frame first (pzstd); 0x184D2A50..5F, checked below
    ("xz", b"\xfd7zXZ\x00", "xz -d"),
    ("bzip2", b"BZh", "bzip2 -d"),
    ("zip", b"PK\x03\x04", "unzip"),
)


def _gunzip(data: bytes, file: str, cap: int) -> bytes:
    """Every member of a gzip file (``cat a.gz b.gz``), as gzip -d and Node's zlib read it; bytes
    after the last member that are not a member are refused (zeros, a tape's padding, are not)."""
    out = bytearray()
    rest = data
    try:
        while True:
            start = len(data) - len(rest)
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while rest:
                out += d.decompress(rest, cap + 1 - len(out))
                if len(out) > cap:
                    raise TraceFormatError(f"{file}: gzip: decompresses to more than {cap} bytes")
                rest = d.unconsumed_tail
                if d.eof:
                    break
            if not d.eof:
                raise TraceFormatError(f"{file}: gzip: not a valid gzip stream (unexpected end of file)")
            rest = d.unused_data
            if not rest.strip(b"\x00"):
                return bytes(out)
            if not rest.startswith(b"\x1f\x8b"):
                at = len(data) - len(rest)
                raise TraceFormatError(
                    f"{file}: gzip: {len(rest)} byte(s) after the member that starts at byte {start}, at byte {at}, are not a gzip member "
                    "(trailing garbage, or another file appended)"
                )
    except zlib.error as e:
        raise TraceFormatError(f"{file}: gzip: not a valid gzip stream ({e})") from None


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _is_skippable(head: bytes) -> bool:
    """A zstd skippable frame's magic: 0x184D2A50 to 0x184D2A5F, little-endian."""
    return len(head) >= 4 and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18"


def _zstd_decompressor(file: str) -> Any:
    """A one-frame zstd decompressor object (``decompress``, ``eof``, ``unused_data``)."""
    try:
        from compression import zstd  # type: ignore[import-not-found]  # Python 3.14 and later

        return zstd.ZstdDecompressor()
    except ImportError:
        pass
    try:
        import zstandard  # type: ignore[import-not-found]
    except ImportError:
        raise TraceFormatError(
            f"{file}: zstd-compressed, and this Python has no zstd decompressor (the standard library has one "
            "from Python 3.14; or pip install zstandard); decompress it first: zstd -d FILE"
        ) from None
    return zstandard.ZstdDecompressor().decompressobj()


def _unzstd(data: bytes, file: str, cap: int) -> bytes:
    """Every frame of a zstd file (``cat a.zst b.zst``, pzstd's output), skippable frames skipped, as
    zstd -d reads it; bytes after the last frame that are not a frame are refused."""
    out = bytearray()
    rest = data
    frames = 0
    while rest:
        at = len(data) - len(rest)
        if _is_skippable(rest):
            if len(rest) < 8 or len(rest) < 8 + int.from_bytes(rest[4:8], "little"):
                raise TraceFormatError(f"{file}: zstd: the stream ends inside a skippable frame at byte {at} (truncated file?)")
            rest = rest[8 + int.from_bytes(rest[4:8], "little") :]
            continue
        if not rest.startswith(_ZSTD_MAGIC):
            raise TraceFormatError(
                f"{file}: zstd: {len(rest)} byte(s) after the last zstd frame, at byte {at}, are not a frame "
                "(trailing garbage, or another file appended)"
            )
        d = _zstd_decompressor(file)
        try:
            out += d.decompress(rest)
        except Exception as e:  # compression.zstd.ZstdError, zstandard.ZstdError
            raise TraceFormatError(f"{file}: zstd: not a valid zstd stream ({e})") from None
        if len(out) > cap:
            raise TraceFormatError(f"{file}: zstd: decompresses to more than {cap} bytes")
        if not d.eof:
            raise TraceFormatError(f"{file}: zstd: the stream ends inside the frame at byte {at} (truncated file?)")
        rest = d.unused_data
        frames += 1
    if frames == 0:
        raise TraceFormatError(f"{file}: zstd: the stream holds no frame (truncated file?)")
    return bytes(out)


def decompress(data: bytes, file: str, cap: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """``data`` decompressed where its first bytes say it is compressed (gzip, zstd), else as it is."""
    for name, magic, command in _MAGIC:
        if data.startswith(magic) or (name == "zstd" and _is_skippable(data)):
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


def read_jsonl(text: str, file: str, max_events: Optional[int] = None) -> Trace:
    """A gpumem JSONL trace: a header line, then one event object per line; TraceBudgetError past
    ``max_events`` events (default: the readers' budget, GPUMEM_TRACE_MAX_EVENTS)."""
    from . import _budget

    limit = _budget.max_trace_events(max_events)
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
        if len(events) >= limit:
            raise _budget.TraceBudgetError(
                f"{file}:{n}: more than {limit} events, past the readers' budget on decoded work; {_budget.raise_budget_hint(limit)}",
                limit,
            )
        events.append((_count(o["timeNs"], "timeNs", n, file), action, ptr, size, stream, tag, reserved))
    if n == 0 or (n == 1 and text.strip() == ""):
        raise TraceFormatError(f"{file}: the file is empty: {expected}")
    if announced is not None and announced != len(events):
        short = " (truncated?)" if len(events) < announced else ""
        raise TraceFormatError(f"{file}:{n + 1}: the header announces {announced} events but the file holds {len(events)}{short}")
    return Trace("jsonl", header, events)


def _read_input(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``: a regular file, or ``-`` for standard input. A FIFO, a
    device or a socket is refused (TraceFormatError) before anything is read from it; the file is
    opened without blocking (a FIFO's open waits for a writer) and checked through its descriptor."""
    if path == "-":
        return sys.stdin.buffer.read(limit)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a folder" if stat.S_ISDIR(mode)
                else "a named pipe (FIFO)" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode)
                else "a character device" if stat.S_ISCHR(mode)
                else "a block device" if stat.S_ISBLK(mode)
                else "not a regular file"
            )
            raise TraceFileError(f"{path} is {kind}, not a regular file: give a trace file, or - to read one from standard input")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            return f.read(limit)
    finally:
        if fd >= 0:
            os.close(fd)


def read_trace(path: str, device: Optional[int] = None, max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES) -> Trace:
    """The trace in ``path``: a PyTorch snapshot (pickle) or a gpumem JSONL trace, compressed or not.
    OSError where the file cannot be read; TraceFormatError for anything malformed."""
    from . import _snapshot

    data = _read_input(path, max_decompressed_bytes + 1)
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
