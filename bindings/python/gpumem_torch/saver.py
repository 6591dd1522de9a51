"""Pause and resume by tag in the shape of torch_memory_saver's singleton (SGLang, and verl through
it, call that API), over gpumem's sleep and wake: a framework swaps the import, and nothing else::

    from gpumem_torch.saver import memory_saver as torch_memory_saver

    with torch_memory_saver.region(tag="weights", enable_cpu_backup=True):
        model = build_model().cuda()
    with torch_memory_saver.region(tag="kv_cache"):
        kv = torch.empty(n, device="cuda")
    torch_memory_saver.pause("kv_cache")      # physical memory back to the driver, addresses kept
    torch_memory_saver.resume("kv_cache")     # mapped again; kv's content undefined (no backup)

The mapping (docs/sleep.md, "torch_memory_saver's shape"): a region's (tag, enable_cpu_backup) is a
gpumem tag of its own, ``saver:<tag>`` or ``saver:<tag>:cpu_backup``, so that one saver tag may
hold allocations with and without a backup, as the peer allows; pause sleeps the saver tags named
(keeping the content of the backed-up ones), resume wakes them. As the peer's, a pause releases the
tag's cached memory with its tensors and a resume maps all of it again (the peer sits beneath
PyTorch's cache, so it pauses and resumes PyTorch's cached segments): gpumem's ``keep_cache``. gpumem
has one mechanism, its allocator installed as PyTorch's (:func:`gpumem_torch.enable`): ``hook_mode``
``"preload"`` and ``"torch"`` are the same here. A CUDA graph captured by
:meth:`MemorySaver.cuda_graph` gets a gpumem tag of its own (PyTorch gives a graph captured through
a pluggable allocator no private pool: no other tensor is given its freed intermediates), which
pauses with its saver tag and replays after resume.

Where the peer kills the process (pause of a paused tag, resume of one not paused) or asserts,
these raise a typed error and change nothing."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

from . import _sleep
from ._dropin import GpumemBackend

HOOK_MODES = ("preload", "torch")
CPU_BACKUP_BACKENDS = ("pinned", "mmap")
_DEFAULT_TAG = "default"

# The peer's environment switches of its preload mode: every allocation from the start of the process
# pausable under the tag "default", with a CPU backup where the second is "1".
_INIT_ENABLE = "TMS_INIT_ENABLE"
_INIT_ENABLE_CPU_BACKUP = "TMS_INIT_ENABLE_CPU_BACKUP"
# ... and its switch of retain_cpu_backup's starting value.
_RETAIN_CPU_BACKUP = "TMS_RETAIN_CPU_BACKUP"


def _gpumem_tag(tag: str, cpu_backup: bool) -> str:
    return f"saver:{tag}:cpu_backup" if cpu_backup else f"saver:{tag}"


def _check_tag(tag: Any, what: str, optional: bool) -> None:
    if optional and tag is None:
        return
    if not isinstance(tag, str):
        raise TypeError(f"gpumem: expected a tag name (str) for {what} but received {tag!r} of type {type(tag).__name__}")


def _check_bool(value: Any, what: str) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"gpumem: expected True or False for {what} but received {value!r} of type {type(value).__name__}")


class MemorySaver:
    """torch_memory_saver's ``TorchMemorySaver`` over gpumem (use the module's :data:`memory_saver`).

    ``backend``: the gpumem calls (:class:`gpumem_torch._dropin.GpumemBackend`); tests give another."""

    def __init__(self, backend: Any = None) -> None:
        self._backend = backend if backend is not None else GpumemBackend()
        self._lock = threading.RLock()
        self._hook_mode = "preload"
        self._initialized = False
        self._retain_cpu_backup = os.environ.get(_RETAIN_CPU_BACKUP) == "1"
        self._memory_margin_bytes = 0
        self._tags: Dict[str, Tuple[str, bool]] = {}  # gpumem tag -> (saver tag, CPU backup)
        self._open_regions = 0  # regions entered and not exited, the init-enabled one included
        self._graphs = 0  # graphs captured by cuda_graph(), each in a gpumem tag of its own

    # -- configuration ------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """True, as the peer's (kept for compatibility there too)."""
        return True

    @property
    def hook_mode(self) -> str:
        return self._hook_mode

    @hook_mode.setter
    def hook_mode(self, hook_mode: str) -> None:
        """``"preload"`` or ``"torch"``: equivalent here, both gpumem's allocator as PyTorch's. Setting
        it installs that allocator now where CUDA is not initialised yet (the peer's preload library
        is in place from the start of the process; gpumem's must be before the first CUDA tensor)."""
        if hook_mode not in HOOK_MODES:
            raise ValueError(f"gpumem: hook_mode is one of {', '.join(HOOK_MODES)} (the same mechanism here), not {hook_mode!r}")
        self._hook_mode = hook_mode
        if not self._backend.cuda_initialized():
            self._ensure_initialized()

    @property
    def memory_margin_bytes(self) -> int:
        raise NotImplementedError("Only setter is supported")

    @memory_margin_bytes.setter
    def memory_margin_bytes(self, value: int) -> None:
        """Device bytes resume leaves free: a resume that would leave less raises OutOfMemoryError
        and wakes nothing (the peer checks it at each allocation in a region instead)."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"gpumem: memory_margin_bytes is an int, not {value!r}")
        if value < 0:
            raise ValueError(f"gpumem: memory_margin_bytes cannot be negative ({value})")
        self._memory_margin_bytes = value

    @property
    def retain_cpu_backup(self) -> bool:
        """False (the default; True where ``TMS_RETAIN_CPU_BACKUP=1``): resume frees the host memory
        that held the backups, as the peer's. True (read at resume): each resumed tag keeps its
        backup, readable with :meth:`get_cpu_backup`, and its next pause copies into the same host
        memory at the same addresses (gpumem's ``wake(retain_backup=True)``)."""
        return self._retain_cpu_backup

    @retain_cpu_backup.setter
    def retain_cpu_backup(self, value: bool) -> None:
        _check_bool(value, "retain_cpu_backup")
        self._retain_cpu_backup = value

    def set_disk_backup_dir(self, path: str) -> None:
        raise NotImplementedError(
            f"gpumem: backups are kept in pinned host memory only; there is no disk backup (directory {path!r})"
        )

    def get_cpu_backup(self, x: Any, zero_copy: bool = False) -> Any:
        """A CPU tensor with ``x``'s content as its region's backup holds it (``x`` a contiguous CUDA
        tensor): while paused with ``enable_cpu_backup``, or resumed with ``retain_cpu_backup`` (then
        the content as it was at the pause); None where no backup holds it. ``zero_copy``: a view of
        the backup's host memory (valid until the region resumes without retaining, pauses again, or
        ``x`` is freed) where the content lies in one stretch of it, else a copy; by default a copy."""
        _check_bool(zero_copy, "zero_copy")
        self._ensure_initialized()
        if zero_copy:
            view = self._backend.view_backup(x)
            if view is not None:
                return view
        return self._backend.read_backup(x)

    # -- regions --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def region(
        self,
        tag: str = _DEFAULT_TAG,
        enable_cpu_backup: bool = False,
        enable_disk_backup: bool = False,
        cpu_backup_backend: Optional[str] = None,
    ) -> Iterator[None]:
        """Allocations inside are pausable under ``tag``; with ``enable_cpu_backup`` their content
        survives pause and resume. Regions nest (the enclosing one is back on exit). The tag is the
        process's: a region may be exited on another thread than the one that entered it, but two
        threads in regions at once share the later one's tag (as the peer's global state)."""
        self._check_region(tag, enable_cpu_backup, enable_disk_backup, cpu_backup_backend)
        self._ensure_initialized()
        with self._enter(_gpumem_tag(tag, enable_cpu_backup), tag, enable_cpu_backup):
            yield

    @contextlib.contextmanager
    def cuda_graph(
        self,
        cuda_graph: Any,
        pool: Any = None,
        stream: Any = None,
        capture_error_mode: str = "global",
        tag: str = _DEFAULT_TAG,
        enable_cpu_backup: bool = False,
        cpu_backup_backend: Optional[str] = None,
    ) -> Iterator[None]:
        """``torch.cuda.graph`` whose memory is allocated under ``tag``: pause(tag) releases it and
        resume(tag) maps it again, and the graph replays after. PyTorch gives a graph captured
        through a pluggable allocator no private pool, so the intermediates it frees at the end of
        capture stay gpumem's cached memory; each capture gets a gpumem tag of its own
        (``saver:<tag>:graph<n>``), so no later tensor is given that memory, and pause keeps the
        cache with the tag (docs/sleep.md)."""
        self._check_region(tag, enable_cpu_backup, False, cpu_backup_backend)
        self._ensure_initialized()
        with self._lock:
            self._graphs += 1
            gpumem_tag = f"saver:{tag}:graph{self._graphs}" + (":cpu_backup" if enable_cpu_backup else "")
        with self._backend.graph(cuda_graph, pool, stream, capture_error_mode):
            with self._enter(gpumem_tag, tag, enable_cpu_backup):
                yield

    @contextlib.contextmanager
    def disable(self) -> Iterator[None]:
        """Inside a region, allocations that are not pausable (gpumem's untagged ``default``); on
        exit the allocator's cached memory goes back to the driver, as the peer disposes its pool."""
        self._ensure_initialized()
        with self._lock:
            if self._open_regions == 0:
                raise _sleep.InvalidStateError("gpumem: disable() is for inside a region (or with TMS_INIT_ENABLE=1); none is open")
        with self._enter(None, None, False):
            yield
        self._backend.empty_cache()

    def _check_region(self, tag: Any, enable_cpu_backup: Any, enable_disk_backup: Any, cpu_backup_backend: Any) -> None:
        _check_tag(tag, "region(tag=...)", optional=False)
        _check_bool(enable_cpu_backup, "enable_cpu_backup")
        _check_bool(enable_disk_backup, "enable_disk_backup")
        if cpu_backup_backend is not None:
            if not enable_cpu_backup:
                raise ValueError("cpu_backup_backend requires enable_cpu_backup=True")
            if cpu_backup_backend not in CPU_BACKUP_BACKENDS:
                raise ValueError(f"gpumem: cpu_backup_backend is one of {', '.join(CPU_BACKUP_BACKENDS)}, not {cpu_backup_backend!r}")
        if enable_cpu_backup and enable_disk_backup:
            raise ValueError("gpumem: enable_cpu_backup and enable_disk_backup are mutually exclusive")
        if enable_disk_backup:
            raise NotImplementedError("gpumem: backups are kept in pinned host memory only; there is no disk backup")

    @contextlib.contextmanager
    def _enter(self, gpumem_tag: Optional[str], tag: Optional[str], cpu_backup: bool) -> Iterator[None]:
        with self._lock:
            previous = self._backend.set_tag(gpumem_tag)
            if gpumem_tag is not None:
                self._tags.setdefault(gpumem_tag, (tag, cpu_backup))
                self._open_regions += 1
        try:
            yield
        finally:
            with self._lock:
                if gpumem_tag is not None:
                    self._open_regions -= 1
                now = self._backend.current_tag()
                expected = gpumem_tag or "default"
                if now != expected:
                    # Another region was entered and not exited since (another thread's): restoring
                    # ours would undo its tag under it. The peer asserts here.
                    raise _sleep.InvalidStateError(
                        f"gpumem: regions exited out of order: leaving {expected!r} while the current tag is {now!r} "
                        "(a region entered since, on another thread, is still open)"
                    )
                self._backend.set_tag(previous)

    # -- pause and resume -----------------------------------------------------------------------

    def pause(self, tag: Optional[str] = None) -> None:
        """Releases the device memory of the regions of ``tag`` (None or "": every region), their
        addresses kept; backed-up content goes to host memory. A tag with no allocation is nothing
        to do, as the peer's. Their cached memory goes too and comes back at resume, as the peer's
        (``keep_cache``). InvalidStateError, with nothing released, where one of them is paused
        already (the peer exits the process)."""
        _check_tag(tag, "pause(tag=...)", optional=True)
        self._ensure_initialized()
        with self._lock:
            chosen, _ = self._chosen_unless(tag, "asleep", "pause", "is paused already; resume it first")
            if chosen:
                self._backend.sleep(chosen, [g for g in chosen if self._tags[g][1]], keep_cache=True)

    def resume(self, tag: Optional[str] = None) -> None:
        """Maps the paused regions of ``tag`` (None or "": every region) again at their addresses
        and copies backed-up content back. InvalidStateError, with nothing done, where one of them
        is not paused (the peer exits the process); OutOfMemoryError where the device has no room
        (then with ``memory_margin_bytes`` to spare), the tags still paused."""
        _check_tag(tag, "resume(tag=...)", optional=True)
        self._ensure_initialized()
        with self._lock:
            chosen, states = self._chosen_unless(tag, "awake", "resume", "is not paused")
            if not chosen:
                return
            if self._memory_margin_bytes:
                need = sum(int(states[g]["slept_bytes"]) for g in chosen)
                free = self._backend.free_device_bytes()
                if need + self._memory_margin_bytes > free:
                    raise _sleep._out_of_memory(
                        f"gpumem: resume needs {need} bytes and memory_margin_bytes={self._memory_margin_bytes} "
                        f"left free, but the device has {free} free; nothing was resumed"
                    )
            self._backend.wake(chosen, retain_backup=self._retain_cpu_backup)
            if not self._retain_cpu_backup:
                self._backend.trim_backup()

    def _chosen(self, tag: Optional[str]) -> Tuple[List[str], Dict[str, Dict[str, Any]]]:
        """The gpumem tags of saver tag ``tag`` (all for None or "") that hold allocations, and
        gpumem's states by tag."""
        states = {s["tag"]: s for s in self._backend.tag_stats()}
        chosen = [g for g, (t, _) in self._tags.items() if g in states and (not tag or t == tag)]
        return chosen, states

    def _chosen_unless(self, tag: Optional[str], state: str, call: str, why: str) -> Tuple[List[str], Dict[str, Dict[str, Any]]]:
        """_chosen(tag), where none of the chosen regions is in ``state`` ("asleep", "awake"):
        otherwise InvalidStateError naming their saver tags, for ``call`` (pause, resume) to
        refuse before it changes anything."""
        chosen, states = self._chosen(tag)
        refused = sorted({self._tags[g][0] for g in chosen if states[g][state]})
        if refused:
            raise _sleep.InvalidStateError(f"gpumem: {call}: tag {', '.join(map(repr, refused))} {why}")
        return chosen, states

    def _ensure_initialized(self) -> None:
        with self._lock:
            if self._initialized:
                return
            self._backend.ensure_enabled("gpumem_torch.saver")
            self._initialized = True
            if os.environ.get(_INIT_ENABLE) == "1":
                # An outermost region that is never exited, as the peer's preload library starts.
                backup = os.environ.get(_INIT_ENABLE_CPU_BACKUP) == "1"
                gpumem_tag = _gpumem_tag(_DEFAULT_TAG, backup)
                self._backend.set_tag(gpumem_tag)
                self._tags.setdefault(gpumem_tag, (_DEFAULT_TAG, backup))
                self._open_regions += 1


@contextlib.contextmanager
def configure_subprocess() -> Iterator[None]:
    """The peer sets LD_PRELOAD for the child processes started inside, so that its library is in
    place before their first CUDA call. gpumem needs nothing preloaded: a child's saver installs
    gpumem's allocator itself on first use, so this leaves the environment as it is."""
    yield


memory_saver = MemorySaver()
"""The process's saver (the peer's ``torch_memory_saver.torch_memory_saver``)."""
