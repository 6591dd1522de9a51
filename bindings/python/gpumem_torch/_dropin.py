"""The gpumem calls that the drop-in shapes (:mod:`gpumem_torch.saver`, :mod:`gpumem_torch.tagged_pool`)
make, behind one object: the shapes' argument checks and state machines are tested without a GPU
by giving them another object with these methods (bindings/python/tests/test_dropin_shapes.py).

Both shapes act through the allocator :func:`gpumem_torch.enable` installs (instance 0): it owns
PyTorch's whole cache, so the memory of CUDA graphs captured inside a region is a tag like any other.
The shapes enable it themselves on first use where nothing initialised CUDA before."""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional

from . import _sleep
from ._stats import instance_raw_stats


class GpumemBackend:
    """The process's gpumem allocator, on the current CUDA device."""

    def ensure_enabled(self, who: str) -> None:
        """Makes gpumem PyTorch's allocator (``$GPUMEM_ALLOCATOR``, else ``expandable``) unless it is
        already; NotEnabledError where CUDA was initialised first (the allocator cannot change then)."""
        package = sys.modules[__package__]
        if package.is_enabled():
            return
        import torch

        if torch.cuda.is_initialized():
            raise _sleep.NotEnabledError(
                f"gpumem: {who} needs gpumem as PyTorch's allocator, and CUDA was initialised before it could be "
                "installed; call gpumem_torch.enable() first thing in the process (before any CUDA tensor or "
                "torch.cuda call), or set it up where the process starts"
            )
        package.enable()

    def cuda_initialized(self) -> bool:
        import torch

        return bool(torch.cuda.is_initialized())

    def set_tag(self, tag: Optional[str]) -> str:
        return _sleep.set_process_tag(tag)

    def current_tag(self) -> str:
        return _sleep.current_tag()

    def _devices(self) -> List[int]:
        """The devices gpumem's allocator has served (its tags are per device)."""
        import torch

        return [d for d in range(torch.cuda.device_count()) if instance_raw_stats(0, d)["active"]]

    def sleep(self, tags: List[str], keep: List[str], keep_cache: bool = False) -> None:
        """Sleeps ``tags`` on every device where they hold memory, as the peers act on every device."""
        for device in self._devices():
            here = {s["tag"] for s in _sleep.tag_stats(device)}
            named = [t for t in tags if t in here]
            if named:
                _sleep.sleep(named, keep=[t for t in keep if t in here], device=device, keep_cache=keep_cache)

    def wake(self, tags: List[str], retain_backup: bool = False) -> None:
        for device in self._devices():
            here = {s["tag"] for s in _sleep.tag_stats(device)}
            named = [t for t in tags if t in here]
            if named:
                _sleep.wake(named, device=device, retain_backup=retain_backup)

    def tag_stats(self) -> List[Dict[str, Any]]:
        """Every device's tags merged by name: ``asleep`` / ``awake`` where asleep / awake on any
        device, the byte counts summed."""
        merged: Dict[str, Dict[str, Any]] = {}
        for device in self._devices():
            for s in _sleep.tag_stats(device):
                m = merged.setdefault(s["tag"], {"tag": s["tag"], "asleep": False, "awake": False, "allocated_bytes": 0, "slept_bytes": 0})
                m["asleep"] = m["asleep"] or s["asleep"]
                m["awake"] = m["awake"] or not s["asleep"]
                m["allocated_bytes"] += s["allocated_bytes"]
                m["slept_bytes"] += s["slept_bytes"]
        return list(merged.values())

    def trim_backup(self) -> None:
        for device in self._devices():
            _sleep.trim_backup(device)

    def empty_cache(self) -> None:
        for device in self._devices():
            sys.modules[__package__].empty_cache(device)

    @staticmethod
    def _check_backed(x: Any) -> None:
        import torch

        if not isinstance(x, torch.Tensor) or not x.is_cuda:
            raise TypeError(f"gpumem: expected a CUDA tensor but received {type(x).__name__}")
        if not x.is_contiguous():
            raise ValueError(f"gpumem: expected a contiguous tensor but received one of shape {tuple(x.shape)} and strides {x.stride()}")

    def view_backup(self, x: Any) -> Any:
        """A CPU tensor over the host memory of tensor ``x``'s backup (its tag asleep keeping its
        content, or awake with a retained backup) where it lies in one stretch; else None. It aliases
        gpumem's memory: valid until that tag wakes without retaining, sleeps again, or ``x`` is freed."""
        import ctypes

        import torch

        self._check_backed(x)
        if x.nbytes == 0:
            return None
        host = _sleep.instance_backup_view(0, x.data_ptr(), x.nbytes, device=x.device)
        if host is None:
            return None
        raw = torch.frombuffer((ctypes.c_uint8 * x.nbytes).from_address(host), dtype=torch.uint8)
        return raw.view(x.dtype).reshape(x.shape)

    def read_backup(self, x: Any) -> Any:
        """A CPU copy of tensor ``x`` from its tag's backup (asleep keeping its content, or awake
        with a retained backup), or None where none holds it."""
        import torch

        self._check_backed(x)
        out = torch.empty(x.shape, dtype=x.dtype)
        found = _sleep.instance_read_backup(0, x.data_ptr(), x.nbytes, out.data_ptr(), device=x.device)
        return out if found else None

    def free_device_bytes(self) -> int:
        """The current device's (the peer's margin is per allocation, on its device)."""
        import torch

        return int(torch.cuda.mem_get_info()[0])

    def graph(self, cuda_graph: Any, pool: Any, stream: Any, capture_error_mode: str) -> Any:
        import torch

        return torch.cuda.graph(cuda_graph, pool=pool, stream=stream, capture_error_mode=capture_error_mode)
