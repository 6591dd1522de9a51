"""Sleep and wake by tag: the process tag that every allocation carries (:func:`region`), and
:func:`sleep` / :func:`wake` of a strategy whose memory is mapped through CUDA virtual memory
management (``expandable``, ``tiered``: the registry's ``sleep`` flag). A sleeping tag's physical
memory goes back to the driver while its virtual addresses stay, so that the tensors' pointers and
captured CUDA graphs stay valid; wake maps memory again at the same addresses and copies kept
content back (vLLM's ``CuMemAllocator.sleep`` / ``wake_up``, torch_memory_saver's ``region`` /
``pause`` / ``resume``). See docs/torch.md.

Only the standard library: PyTorch is not imported here."""

from __future__ import annotations

import contextlib
import ctypes
import json
import sys
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Type, Union

from . import _library
from ._stats import device_index, instance_raw_stats

# gpumem_torch.h's return codes.
_ERR_CONFIG, _ERR_DEVICE, _ERR_CUDA, _ERR_ARGUMENT, _ERR_OUT_OF_MEMORY, _ERR_STATE = 1, 2, 3, 4, 5, 6

Tags = Union[None, str, Iterable[str]]


class OutOfMemoryError(RuntimeError):
    """Sleep could not get host memory for the backups (nothing was released), or wake found no room
    on the device (the tags stay asleep, their backups whole). Where PyTorch is imported the error
    raised is also a ``torch.OutOfMemoryError``."""


class InvalidStateError(RuntimeError):
    """The call cannot be made in this state: sleep and wake on a strategy that cannot sleep (one
    without the registry's ``sleep`` flag)."""


class NotEnabledError(InvalidStateError):
    """:func:`sleep`, :func:`wake` or :func:`tag_stats` with nothing to act on: neither
    :func:`gpumem_torch.enable` nor a first allocation has made the allocator they address on that
    device, so there are no tags (the call would otherwise report an empty success that hides a
    missing ``enable()``)."""


_with_torch: Dict[type, Type[OutOfMemoryError]] = {}


def _out_of_memory(message: str) -> OutOfMemoryError:
    """gpumem's OutOfMemoryError, which is a ``torch.OutOfMemoryError`` as well where PyTorch is
    imported (``except torch.OutOfMemoryError`` catches it, as it catches PyTorch's own)."""
    torch = sys.modules.get("torch")
    base = None
    if torch is not None:
        base = getattr(torch, "OutOfMemoryError", None) or getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if not isinstance(base, type) or not issubclass(base, BaseException):
        return OutOfMemoryError(message)
    cls = _with_torch.get(base)
    if cls is None:
        cls = _with_torch[base] = type("OutOfMemoryError", (OutOfMemoryError, base), {"__module__": "gpumem_torch", "__doc__": OutOfMemoryError.__doc__})
    return cls(message)


def _raise(rc: int) -> None:
    message = _library.last_error()
    if rc == _ERR_OUT_OF_MEMORY:
        raise _out_of_memory(message)
    if rc == _ERR_STATE:
        raise InvalidStateError(message)
    if rc in (_ERR_ARGUMENT, _ERR_DEVICE, _ERR_CONFIG):
        raise ValueError(message)
    raise RuntimeError(message)


_NAMES = ctypes.POINTER(ctypes.c_char_p)


_declared = False


class _SleepRequest(ctypes.Structure):
    """The library's gpumem_sleep_request (gpumem_torch.h): one sleep request, passed whole."""

    _fields_ = [
        ("tags", _NAMES),
        ("tag_count", ctypes.c_size_t),
        ("keep_all", ctypes.c_int),
        ("keep", _NAMES),
        ("keep_count", ctypes.c_size_t),
        ("keep_cache", ctypes.c_int),
    ]


def _lib() -> ctypes.CDLL:
    global _declared
    lib = _library.load()
    if _declared:
        return lib
    if not hasattr(lib, "gpumem_instance_sleep"):
        raise RuntimeError(f"gpumem: {_library.loaded_path()} cannot sleep and wake by tag; rebuild it")
    c_int, c_size_t, c_char_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p
    out = ctypes.POINTER(c_char_p)
    for name, restype, argtypes in (
        ("gpumem_set_process_tag", c_char_p, [c_char_p]),
        ("gpumem_current_tag", c_char_p, []),
        ("gpumem_instance_sleep", c_int, [c_int, c_int, _NAMES, c_size_t, c_int, _NAMES, c_size_t, out]),
        ("gpumem_instance_wake", c_int, [c_int, c_int, _NAMES, c_size_t, out]),
        ("gpumem_instance_sleep_cache", c_int, [c_int, c_int, _NAMES, c_size_t, c_int, _NAMES, c_size_t, c_int, out]),
        ("gpumem_instance_sleep_request", c_int, [c_int, c_int, ctypes.POINTER(_SleepRequest), out]),
        ("gpumem_instance_wake_retain", c_int, [c_int, c_int, _NAMES, c_size_t, c_int, out]),
        ("gpumem_instance_backup_view", c_int, [c_int, c_int, ctypes.c_void_p, c_size_t, ctypes.POINTER(ctypes.c_void_p)]),
        ("gpumem_instance_tag_stats", c_int, [c_int, c_int, out]),
        ("gpumem_instance_trim_backup", c_int, [c_int, c_int]),
        ("gpumem_instance_reserve_backup", c_int, [c_int, c_int, ctypes.c_uint64]),
    ):
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    _declared = True
    return lib


def _tag_bytes(tag: Any, what: str) -> bytes:
    """A tag name as the library reads it; TypeError for a non-string, ValueError for a NUL (a C
    string would end there). The library checks the rest (empty, too long, control characters)."""
    if not isinstance(tag, str):
        raise TypeError(f"gpumem: expected a tag name (str) in {what} but received {tag!r} of type {type(tag).__name__}")
    if "\x00" in tag:
        raise ValueError(f"gpumem: tag {tag!r} in {what} holds a NUL character")
    return tag.encode("utf-8")


def _names(tags: Tags, what: str) -> Tuple[Any, int]:
    """(array, count) for the library: (None, 0) for None (every tag)."""
    if tags is None:
        return None, 0
    listed = [tags] if isinstance(tags, str) else list(tags)
    if not listed:
        raise ValueError(f"gpumem: {what} is empty; pass None for every tag")
    encoded = [_tag_bytes(t, what) for t in listed]
    return (ctypes.c_char_p * len(encoded))(*encoded), len(encoded)


_TIMING_KEYS = (
    ("quiesce_seconds", "quiesceSeconds"),
    ("backup_wait_seconds", "backupWaitSeconds"),
    ("queue_seconds", "queueSeconds"),
    ("copy_wait_seconds", "copyWaitSeconds"),
    ("release_seconds", "releaseSeconds"),
    ("fault_seconds", "faultSeconds"),
    ("register_seconds", "registerSeconds"),
    ("pooled_bytes", "pooledBytes"),
    ("pinned_bytes", "pinnedBytes"),
)


def _report(text: bytes) -> Dict[str, Any]:
    r = json.loads(text.decode("utf-8"))
    report = {
        "changed": r["changed"],
        "unchanged": r["unchanged"],
        "device_bytes": r["deviceBytes"],
        "copied_bytes": r["copiedBytes"],
        "seconds": r["seconds"],
    }
    if "timing" in r:  # sleep only: where the time went (bench/sleep/sleep_bench.py prints it)
        report["timing"] = {key: r["timing"][js] for key, js in _TIMING_KEYS}
    return report


def set_process_tag(tag: Optional[str]) -> str:
    """Sets the tag of every later allocation of the process (None or ``"default"``: none);
    returns the previous one. Prefer :func:`region`."""
    lib = _lib()
    previous = lib.gpumem_set_process_tag(None if tag is None else _tag_bytes(tag, "the tag"))
    if previous is None:
        raise ValueError(_library.last_error())
    return previous.decode("utf-8")


def current_tag() -> str:
    """The tag this thread's allocations get now (``"default"`` outside any :func:`region`)."""
    return _lib().gpumem_current_tag().decode("utf-8")


@contextlib.contextmanager
def region(tag: str) -> Iterator[None]:
    """Inside the block, every allocation gpumem serves carries ``tag``, so that :func:`sleep` and
    :func:`wake` can name it::

        with gpumem_torch.region("weights"):
            model = build_model().cuda()
        with gpumem_torch.region("kv"):
            cache = torch.empty(n, device="cuda")

    It sets the *process* tag, not a thread's: autograd runs backward on threads of its own, and the
    gradients it allocates there carry the tag too. The previous tag is restored on exit
    (exceptions included), so blocks nest; two threads in regions of their own at once share
    one process tag (the later one wins). ValueError for a bad name (empty, longer than 128 bytes,
    a control character)."""
    previous = set_process_tag(tag)
    try:
        yield
    finally:
        set_process_tag(previous)


def _flag(value: Any, what: str) -> int:
    if not isinstance(value, bool):
        raise TypeError(f"gpumem: {what} is True or False, not {value!r}")
    return int(value)


def instance_sleep(
    instance: int, tags: Tags = None, keep: Union[bool, str, Iterable[str]] = True, device: Any = None, keep_cache: bool = False
) -> Dict[str, Any]:
    cache = _flag(keep_cache, "keep_cache")
    names, count = _names(tags, "tags")
    keep_all = 1
    keep_names, keep_count = None, 0
    if keep is False:
        keep_all = 0
    elif keep is not True:
        if isinstance(keep, (bool, int)) or keep is None:
            raise TypeError(f"gpumem: keep is True, False or a list of tags, not {keep!r}")
        listed = [keep] if isinstance(keep, str) else list(keep)
        keep_all = 0
        if listed:
            encoded = [_tag_bytes(t, "keep") for t in listed]
            keep_names, keep_count = (ctypes.c_char_p * len(encoded))(*encoded), len(encoded)
    request = _SleepRequest(names, count, keep_all, keep_names, keep_count, cache)
    report = ctypes.c_char_p()
    rc = _lib().gpumem_instance_sleep_request(instance, device_index(device), ctypes.byref(request), ctypes.byref(report))
    if rc != 0:
        _raise(rc)
    return _report(report.value or b"{}")


def instance_wake(instance: int, tags: Tags = None, device: Any = None, retain_backup: bool = False) -> Dict[str, Any]:
    retain = _flag(retain_backup, "retain_backup")
    names, count = _names(tags, "tags")
    report = ctypes.c_char_p()
    rc = _lib().gpumem_instance_wake_retain(instance, device_index(device), names, count, retain, ctypes.byref(report))
    if rc != 0:
        _raise(rc)
    return _report(report.value or b"{}")


def _states(instance: int, device: Any) -> Dict[str, Any]:
    text = ctypes.c_char_p()
    rc = _lib().gpumem_instance_tag_stats(instance, device_index(device), ctypes.byref(text))
    if rc != 0:
        _raise(rc)
    return json.loads((text.value or b"{}").decode("utf-8"))


_STATE_KEYS = (
    ("tag", "tag"),
    ("asleep", "asleep"),
    ("mode", "mode"),
    ("allocated_bytes", "allocatedBytes"),
    ("device_bytes", "deviceBytes"),
    ("slept_bytes", "sleptBytes"),
    ("backup_bytes", "backupBytes"),
)


def instance_tag_stats(instance: int, device: Any = None) -> List[Dict[str, Any]]:
    return [{key: state[js] for key, js in _STATE_KEYS} for state in _states(instance, device)["tags"]]


def instance_backup_pool_bytes(instance: int, device: Any = None) -> int:
    return int(_states(instance, device)["backupPoolBytes"])


def instance_trim_backup(instance: int, device: Any = None) -> None:
    rc = _lib().gpumem_instance_trim_backup(instance, device_index(device))
    if rc != 0:
        _raise(rc)


def _require_enabled(device: Any, what: str) -> None:
    """NotEnabledError unless the allocator of instance 0 exists on ``device``: enable() was
    called, or the library served a first allocation there (a C caller without PyTorch)."""
    package = sys.modules.get(__package__ or "gpumem_torch")
    if package is not None and getattr(package, "is_enabled", lambda: False)():
        return
    if instance_raw_stats(0, device)["active"]:
        return
    raise NotEnabledError(
        f"gpumem: {what}: nothing is enabled on device {device_index(device)}; call gpumem_torch.enable() (a strategy "
        "with the sleep flag, e.g. 'expandable') before CUDA is initialised, or use an Allocator's own methods"
    )


def instance_read_backup(instance: int, addr: int, nbytes: int, out: int, device: Any = None) -> bool:
    """Copies the kept content of device range [addr, addr + nbytes) into host memory at ``out``
    while its tag sleeps in keep mode; False, nothing copied, where no sleeping tag's backup holds
    all of it (awake, discarded, not inside a live block)."""
    lib = _lib()
    fn = getattr(lib, "gpumem_instance_read_backup", None)
    if fn is None:
        raise RuntimeError(f"gpumem: {_library.loaded_path()} cannot read a sleeping tag's backup; rebuild it")
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    found = ctypes.c_int(0)
    rc = fn(instance, device_index(device), addr, nbytes, out, ctypes.byref(found))
    if rc != 0:
        _raise(rc)
    return bool(found.value)


def instance_backup_view(instance: int, addr: int, nbytes: int, device: Any = None) -> Optional[int]:
    """The host address where a backup holds device range [addr, addr + nbytes) in one stretch (a
    sleeping tag's kept content, or an awake tag's retained one); None where none does. Valid until
    that tag wakes without retain_backup, sleeps again, or the block is freed."""
    host = ctypes.c_void_p()
    rc = _lib().gpumem_instance_backup_view(instance, device_index(device), addr, nbytes, ctypes.byref(host))
    if rc != 0:
        _raise(rc)
    return host.value or None


def _reserve_bytes(value: Any) -> int:
    """reserve_backup's byte count: a non-negative int (TypeError for another type, bool included;
    ValueError below 0 or past 2**64 - 1)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"gpumem: reserve_backup takes a byte count (int), not {value!r} of type {type(value).__name__}")
    if value < 0 or value >= 2**64:
        raise ValueError(f"gpumem: reserve_backup takes a byte count from 0 to 2**64 - 1, not {value}")
    return value


def instance_reserve_backup(instance: int, nbytes: Any, device: Any = None) -> None:
    count = _reserve_bytes(nbytes)
    rc = _lib().gpumem_instance_reserve_backup(instance, device_index(device), count)
    if rc != 0:
        _raise(rc)


def sleep(tags: Tags = None, keep: Union[bool, str, Iterable[str]] = True, device: Any = None, keep_cache: bool = False) -> Dict[str, Any]:
    """Puts ``tags`` (a name, a list of names, or None for every tag the strategy has allocated in)
    of the allocator :func:`gpumem_torch.enable` installed to sleep on ``device`` (default: the
    current device). ``keep``: True (every tag keeps its content: copied to pinned host memory),
    False (none does: the tensors read as undefined after wake), or the list of tags that keep it
    (the others discard: vLLM's ``offload_tags``). Waits for the work queued on the device, then
    releases the tags' physical memory, live and cached; the virtual addresses stay. ``keep_cache``:
    the tags' cached memory (no live tensor in it) is mapped again at wake too, so that each holds
    after wake the device memory it held before (what a CUDA graph whose intermediates were freed at
    the end of capture needs); False releases it for good ('tiered' offers only that).

    Returns ``{"changed": [...], "unchanged": [...], "device_bytes": ..., "copied_bytes": ...,
    "seconds": ...}`` (``unchanged``: tags asleep already). Raises ValueError for a tag the
    strategy does not know (the message lists those it knows) or a bad name; OutOfMemoryError
    (also a ``torch.OutOfMemoryError`` where PyTorch is imported) when host memory for the
    backups cannot be had, before anything is released; InvalidStateError for a strategy that
    cannot sleep; NotEnabledError (an InvalidStateError) when nothing is enabled on the device. While a tag sleeps, tensors in it may be freed, but not read or written, and a
    new allocation in it fails (docs/torch.md)."""
    report = instance_sleep(0, tags, keep, device, keep_cache)  # the library's errors first: they say more
    _require_enabled(device, "sleep")
    return report


def wake(tags: Tags = None, device: Any = None, retain_backup: bool = False) -> Dict[str, Any]:
    """Wakes ``tags`` (None: every sleeping tag): physical memory mapped again at the same
    addresses, kept content copied back; complete when it returns. Awake tags named are reported
    ``unchanged``. ``retain_backup``: each woken tag keeps the host memory that held its content,
    still readable, for its next sleep, which reuses it at the same host addresses
    (torch_memory_saver's ``retain_cpu_backup``); False returns it to the pool. Raises as
    :func:`sleep` does; OutOfMemoryError when the device has no room (the tags stay asleep, their
    backups whole)."""
    report = instance_wake(0, tags, device, retain_backup)
    _require_enabled(device, "wake")
    return report


def tag_stats(device: Any = None) -> List[Dict[str, Any]]:
    """Every tag the strategy has allocated in on ``device``, in that order: ``{"tag", "asleep",
    "mode" ("keep"/"discard"), "allocated_bytes" (held by tensors, asleep or awake), "device_bytes"
    (physical memory held now, live and cached), "slept_bytes" (released by its sleep),
    "backup_bytes" (host memory holding its content)}``."""
    stats = instance_tag_stats(0, device)
    _require_enabled(device, "tag_stats")
    return stats


def backup_pool_bytes(device: Any = None) -> int:
    """Host bytes kept after wake for the next sleep's backups (pinned once, reused)."""
    return instance_backup_pool_bytes(0, device)


def trim_backup(device: Any = None) -> None:
    """Frees the host memory kept for later backups (:func:`backup_pool_bytes`)."""
    instance_trim_backup(0, device)


def reserve_backup(nbytes: int, device: Any = None) -> None:
    """Starts pinning ``nbytes`` of host memory for the backups of later sleeps on ``device``, on
    background threads, and returns at once, so that a first :func:`sleep` copies at the host
    link's speed instead of pinning while it copies. A sleep before the pinning is done takes what
    is ready and waits for, or adds to, the rest; :func:`backup_pool_bytes` counts the memory as it
    is ready. What the pool holds or is pinning already counts towards ``nbytes``. Raises TypeError
    or ValueError for a bad count, OutOfMemoryError past the backup limit (nothing started),
    InvalidStateError for a strategy that cannot sleep. ``GPUMEM_SLEEP_RESERVE=SIZE`` does the same
    when the device's allocator is made."""
    instance_reserve_backup(0, nbytes, device)
