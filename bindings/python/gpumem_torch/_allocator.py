"""Allocator objects (one strategy each, several per process) and the tier placement of a block of
code. PyTorch is imported only when an allocator object is made."""

from __future__ import annotations

import contextlib
import ctypes
import threading
from typing import Any, Dict, Iterator, List, Optional

from . import _driver, _library, _sleep, _warnings
from ._stats import instance_memory_stats, instance_raw_stats, device_index

_instances_lock = threading.Lock()
_instances: Dict[str, int] = {}  # configuration text -> instance number

PLACEMENTS = {"auto": 0, "device": 1, "host": 2}
_PLACEMENT_NAMES = {-1: None, 0: "auto", 1: "device", 2: "host"}


def _spec(strategy: str, options: Dict[str, Any]) -> str:
    values = _library.option_values(strategy, options)
    for name, value in values.items():
        if "\n" in value or "\r" in value:
            raise ValueError(f"gpumem: {name}={value!r}: a value cannot contain a line break")
    return "".join(f"{name}={value}\n" for name, value in sorted(values.items()))


def describe(strategy: str, **options: Any) -> str:
    """The configuration string of ``strategy`` with ``options`` (as :func:`gpumem_torch.config`
    prints it), validated by the library; nothing is created and neither PyTorch nor CUDA is
    touched. ValueError with the library's message for a bad value, TypeError for an unknown option."""
    lib = _library.load()
    text = lib.gpumem_describe_config(_spec(strategy, options).encode())
    if text is None:
        raise ValueError(_library.last_error())
    return text.decode()


class Allocator:
    """One gpumem strategy as a PyTorch allocator (see :func:`allocator`).

    - ``torch.cuda.memory.change_current_allocator(alloc)``: the whole process, before CUDA is
      initialised (``alloc.allocator()`` is the ``torch._C._cuda_CUDAAllocator`` it installs).
    - ``pool = alloc.mem_pool()`` (or ``torch.cuda.MemPool(alloc.mempool_allocator())``) and
      ``with torch.cuda.use_mem_pool(pool): ...``: the tensors made inside the block, under PyTorch's
      own caching allocator, which asks this strategy for its segments.
    """

    def __init__(self, instance: int, strategy: str, options: Dict[str, Any]):
        import torch

        path = _library.loaded_path()
        self.instance = instance
        self.strategy = strategy
        self.options = dict(options)
        # Throws on failure: PyTorch's pluggable allocator does not check the pointer it gets.
        self._pluggable = torch.cuda.memory.CUDAPluggableAllocator(path, f"gpumem_malloc_{instance}", f"gpumem_free_{instance}")
        # Returns NULL on failure: a MemPool's caching allocator checks it, releases its cached
        # segments, retries, and raises torch.OutOfMemoryError.
        self._for_mempool = torch.cuda.memory.CUDAPluggableAllocator(
            path, f"gpumem_mempool_malloc_{instance}", f"gpumem_free_{instance}"
        )

    def allocator(self):
        """The ``torch._C._cuda_CUDAAllocator`` for ``change_current_allocator`` (which calls this);
        out of memory raises RuntimeError('CUDA out of memory. gpumem: ...')."""
        return self._pluggable.allocator()

    def mempool_allocator(self):
        """The ``torch._C._cuda_CUDAAllocator`` for ``torch.cuda.MemPool(...)``: out of memory inside
        the pool is PyTorch's own ``torch.OutOfMemoryError``; gpumem's detail is then
        :func:`gpumem_torch.last_error` (same thread) and ``memory_stats()['num_ooms']`` counts it."""
        return self._for_mempool.allocator()

    def mem_pool(self, use_on_oom: bool = False, no_split: bool = False):
        """``torch.cuda.MemPool(self.mempool_allocator(), ...)`` (PyTorch 2.5 or later)."""
        import torch

        if not hasattr(torch.cuda, "MemPool"):
            raise RuntimeError(f"gpumem: torch {torch.__version__} has no torch.cuda.MemPool (PyTorch 2.5 or later)")
        kwargs = {}
        if use_on_oom:
            kwargs["use_on_oom"] = True
        if no_split:
            kwargs["no_split"] = True
        return torch.cuda.MemPool(self.mempool_allocator(), **kwargs)

    def config(self) -> str:
        """This allocator's configuration string, e.g. ``strategy=uvm uvm.prefetch=1 ...``."""
        return _library.load().gpumem_instance_config(self.instance).decode()

    def raw_stats(self, device: Any = None) -> Dict[str, int]:
        """The library's counters of this allocator on ``device`` (see gpumem_torch.raw_stats)."""
        return instance_raw_stats(self.instance, device)

    def memory_stats(self, device: Any = None):
        """This allocator's statistics, keyed like ``torch.cuda.memory_stats()`` (see
        gpumem_torch.memory_stats)."""
        return instance_memory_stats(self.instance, device)

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        """Sets this allocator's allocated and reserved peaks to the current values."""
        lib = _library.load()
        if lib.gpumem_instance_reset_peak(self.instance, device_index(device)) != 0:
            raise RuntimeError(_library.last_error())

    reset_peak_stats = reset_peak_memory_stats  # the older name (gpumem_torch.reset_peak_stats)

    def empty_cache(self, device: Any = None) -> None:
        """Gives what the strategy caches back to the driver (what PyTorch's caching allocator
        holds in a MemPool is PyTorch's: ``torch.cuda.empty_cache()`` releases that first)."""
        lib = _library.load()
        if lib.gpumem_instance_trim(self.instance, device_index(device)) != 0:
            raise RuntimeError(_library.last_error())

    def sleep(self, tags: _sleep.Tags = None, keep: Any = True, device: Any = None) -> Dict[str, Any]:
        """Puts tags of this allocator's strategy to sleep (see :func:`gpumem_torch.sleep`). In a
        MemPool the tags are those of the segments PyTorch asked for: a segment carries the tag
        current when it was made, and the blocks PyTorch keeps inside it sleep with it."""
        return _sleep.instance_sleep(self.instance, tags, keep, device)

    def wake(self, tags: _sleep.Tags = None, device: Any = None) -> Dict[str, Any]:
        """Wakes tags of this allocator's strategy (see :func:`gpumem_torch.wake`)."""
        return _sleep.instance_wake(self.instance, tags, device)

    def tag_stats(self, device: Any = None) -> List[Dict[str, Any]]:
        """This allocator's tags (see :func:`gpumem_torch.tag_stats`)."""
        return _sleep.instance_tag_stats(self.instance, device)

    def backup_pool_bytes(self, device: Any = None) -> int:
        """Host bytes this allocator keeps for later backups (see :func:`gpumem_torch.backup_pool_bytes`)."""
        return _sleep.instance_backup_pool_bytes(self.instance, device)

    def trim_backup(self, device: Any = None) -> None:
        """Frees the host memory this allocator keeps for later backups."""
        _sleep.instance_trim_backup(self.instance, device)

    def reserve_backup(self, nbytes: int, device: Any = None) -> None:
        """Starts pinning host memory for this allocator's later backups in the background (see
        :func:`gpumem_torch.reserve_backup`)."""
        _sleep.instance_reserve_backup(self.instance, nbytes, device)

    def __repr__(self) -> str:
        return f"gpumem_torch.Allocator(instance={self.instance}, {self.config()})"


def allocator(strategy: str, **options: Any) -> Allocator:
    """An allocator object for ``strategy`` (one of :data:`gpumem_torch.STRATEGIES`, listed with
    their options by :func:`gpumem_torch.strategies`; ``native``, the older name of ``plugin``, and
    ``plugin:PATH`` are deprecated spellings) with ``options`` (the keywords of :func:`gpumem_torch.enable`), configured from its arguments
    alone (the environment is not read). For ``torch.cuda.memory.change_current_allocator(alloc)``
    and for ``torch.cuda.MemPool``: ``pool = alloc.mem_pool()``.

    Several allocators with different strategies can live in one process (up to 7, each with its
    own statistics); asking again for the same strategy and options returns an object on the same
    instance (its statistics are shared). Needs PyTorch (ImportError without it). ValueError for a
    bad value (the library's message), TypeError for an unknown option, DriverUnsupportedError when
    the NVIDIA driver is older than the strategy needs, RuntimeError when all 7 instances are taken."""
    import torch  # noqa: F401  (ImportError is the clear message here)

    spec = _spec(strategy, options)
    lib = _library.load()
    with _instances_lock:
        number = _instances.get(spec)
        if number is None:
            with _warnings.collected():  # deprecated spellings (plugin:PATH): FutureWarning
                rc = lib.gpumem_instance_create(spec.encode())
            if rc < 0:
                message = _library.last_error()
                if rc == -_driver.ERR_DRIVER:
                    raise _driver.unsupported(message)
                raise (RuntimeError if rc == -4 else ValueError)(message)
            number = _instances[spec] = rc
    return Allocator(number, strategy, options)


def set_thread_placement(tier: Optional[str]) -> Optional[str]:
    """Sets where this thread's next allocations from a ``tiered`` allocator go: ``'auto'``,
    ``'device'``, ``'host'``, or None for the allocator's own ``placement`` option. Returns the
    previous value. Prefer :func:`place`."""
    if tier is not None and tier not in PLACEMENTS:
        raise ValueError(f"gpumem: expected one of 'auto', 'device', 'host' or None for the placement but received {tier!r}")
    lib = _library.load()
    previous = ctypes.c_int(-1)
    if lib.gpumem_set_thread_placement(-1 if tier is None else PLACEMENTS[tier], ctypes.byref(previous)) != 0:
        raise ValueError(_library.last_error())
    return _PLACEMENT_NAMES[previous.value]


def thread_placement() -> Optional[str]:
    """This thread's placement (None: the allocator's own)."""
    return _PLACEMENT_NAMES[_library.load().gpumem_thread_placement()]


@contextlib.contextmanager
def place(tier: str) -> Iterator[None]:
    """Inside the block, this thread's allocations from a ``tiered`` allocator go to ``tier``:
    ``'host'`` (mapped pinned host memory, read in place by kernels over the interconnect),
    ``'device'`` (device memory only: out of memory rather than the host) or ``'auto'`` (the device
    while its budget allows, then the host). Other strategies ignore it. The previous placement is
    restored on exit, so blocks nest.

    PyTorch tells an allocator nothing about what a tensor is for, so the program says it::

        with gpumem_torch.place("host"):
            optimizer.step()          # the optimizer's states are made here, on the host

    Thread-local, like ``torch.cuda.use_mem_pool``: autograd runs backward on threads of its own,
    whose allocations keep the allocator's placement."""
    previous = set_thread_placement(tier)
    try:
        yield
    finally:
        set_thread_placement(previous)
