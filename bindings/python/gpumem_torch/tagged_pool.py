"""Sleep and wake in the shape of vLLM's ``CuMemAllocator`` (vLLM's sleep mode, which verl, OpenRLHF
and NeMo-RL call), over gpumem's sleep and wake: a framework swaps the import, and nothing else::

    from gpumem_torch.tagged_pool import TaggedPool as CuMemAllocator

    allocator = CuMemAllocator.get_instance()
    with allocator.use_memory_pool(tag="weights"):
        model = build_model().cuda()
    with allocator.use_memory_pool(tag="kv_cache"):
        kv = torch.empty(n, device="cuda")
    allocator.sleep(offload_tags=("weights",))   # weights kept in host memory, kv_cache discarded
    allocator.wake_up(["weights"])
    allocator.wake_up(["kv_cache"])

The mapping (docs/sleep.md, "vLLM's CuMemAllocator shape"): a pool tag is the gpumem tag
``pool:<tag>``, apart from gpumem's untagged ``default`` (memory outside every pool, which sleep
leaves alone, as vLLM's does); ``sleep`` puts every pool tag to sleep, keeping the content of the
tags in ``offload_tags`` and discarding the rest; ``wake_up`` wakes the tags named (None: all).
Tags no pool allocated in are ignored, as vLLM's loops over its allocations ignore them."""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from . import _sleep
from ._dropin import GpumemBackend


def _gpumem_tag(tag: str) -> str:
    return f"pool:{tag}"


def _tag_list(tags: Any, what: str) -> Tuple[str, ...]:
    """A tag, or a tuple, list or set of tags, as a tuple; TypeError for anything else."""
    listed = (tags,) if isinstance(tags, str) else tags
    if not isinstance(listed, (tuple, list, set, frozenset)):
        raise TypeError(f"gpumem: {what} is a tag or a tuple of tags, not {tags!r}")
    for tag in listed:
        if not isinstance(tag, str):
            raise TypeError(f"gpumem: expected tag names (str) in {what} but received {tag!r} of type {type(tag).__name__}")
    return tuple(listed)


class TaggedPool:
    """vLLM's ``CuMemAllocator`` over gpumem. One per process (:meth:`get_instance`), as vLLM's:
    the tags are the process's.

    ``backend``: the gpumem calls (:class:`gpumem_torch._dropin.GpumemBackend`); tests give another."""

    instance: Optional["TaggedPool"] = None
    default_tag: str = "default"
    _instance_lock = threading.Lock()

    @staticmethod
    def get_instance() -> "TaggedPool":
        """The process's pool, made on first call; gpumem becomes PyTorch's allocator then where it
        is not already (NotEnabledError where CUDA was initialised first: call
        :func:`gpumem_torch.enable` at the start of the process)."""
        with TaggedPool._instance_lock:
            if TaggedPool.instance is None:
                pool = TaggedPool()
                pool._backend.ensure_enabled("gpumem_torch.tagged_pool")
                TaggedPool.instance = pool
            return TaggedPool.instance

    def __init__(self, backend: Any = None) -> None:
        self._backend = backend if backend is not None else GpumemBackend()
        self._lock = threading.RLock()
        self._tags: Dict[str, str] = {}  # pool tag -> gpumem tag, in the order first used
        self.current_tag: str = TaggedPool.default_tag

    @contextlib.contextmanager
    def use_memory_pool(self, tag: Optional[str] = None) -> Iterator[None]:
        """Allocations inside are in the pool under ``tag`` (None: ``"default"``). Blocks nest.
        Unlike vLLM's, blocks freed inside stay in gpumem's cache until sleep or
        :func:`gpumem_torch.empty_cache` (vLLM releases its pool's free segments on exit)."""
        if tag is None:
            tag = TaggedPool.default_tag
        if not isinstance(tag, str):
            raise TypeError(f"gpumem: use_memory_pool(tag=...) is a tag name (str), not {tag!r} of type {type(tag).__name__}")
        gpumem_tag = _gpumem_tag(tag)
        with self._lock:
            self._tags.setdefault(tag, gpumem_tag)
            previous = self._backend.set_tag(gpumem_tag)
            old_tag, self.current_tag = self.current_tag, tag
        try:
            yield
        finally:
            with self._lock:
                self.current_tag = old_tag
                now = self._backend.current_tag()
                if now != gpumem_tag:
                    raise _sleep.InvalidStateError(
                        f"gpumem: use_memory_pool blocks exited out of order: leaving {gpumem_tag!r} while the current "
                        f"tag is {now!r} (a block entered since, on another thread, is still open)"
                    )
                self._backend.set_tag(previous)

    def sleep(self, offload_tags: Union[None, str, Iterable[str]] = None) -> None:
        """Puts every pool tag to sleep: the content of ``offload_tags`` (None: ``("default",)``) is
        kept in host memory, the others' discarded; then the allocator's idle cached memory goes
        back to the driver (vLLM empties PyTorch's cache here). Tags asleep already stay as they are."""
        offload = _tag_list((TaggedPool.default_tag,) if offload_tags is None else offload_tags, "offload_tags")
        with self._lock:
            asleep, awake = self._known()
            chosen = [g for t, g in self._tags.items() if g in awake]
            if chosen:
                keep = [self._tags[t] for t in offload if t in self._tags]
                self._backend.sleep(chosen, [g for g in chosen if g in keep])
        gc.collect()
        self._backend.empty_cache()

    def wake_up(self, tags: Optional[List[str]] = None) -> None:
        """Wakes the pool tags named (None: every one); kept content is back when it returns, a
        discarded tag's memory holds undefined bytes. Awake or unknown tags are left alone. An
        OutOfMemoryError (a RuntimeError) leaves the tags asleep with their content whole."""
        named = None if tags is None else _tag_list(tags, "tags")
        with self._lock:
            asleep, _ = self._known()
            chosen = [g for t, g in self._tags.items() if g in asleep and (named is None or t in named)]
            if chosen:
                self._backend.wake(chosen)

    def get_current_usage(self) -> int:
        """Bytes held by tensors in the pool's tags, asleep or awake (vLLM's counts the segments of
        its pool; gpumem's cache is not counted)."""
        with self._lock:
            mine = set(self._tags.values())
            return sum(int(s["allocated_bytes"]) for s in self._backend.tag_stats() if s["tag"] in mine)

    def _known(self) -> Tuple[set, set]:
        """(asleep, awake): the gpumem tags gpumem knows asleep, and awake, on some device."""
        asleep, awake = set(), set()
        for s in self._backend.tag_stats():
            if s["asleep"]:
                asleep.add(s["tag"])
            if s["awake"]:
                awake.add(s["tag"])
        return asleep, awake
