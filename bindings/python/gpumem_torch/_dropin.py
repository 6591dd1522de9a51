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

    def sleep(self, tags: List[str], keep: List[str]) -> Dict[str, Any]:
        return _sleep.sleep(tags, keep=keep)

    def wake(self, tags: List[str]) -> Dict[str, Any]:
        return _sleep.wake(tags)

    def tag_stats(self) -> List[Dict[str, Any]]:
        return _sleep.tag_stats()

    def trim_backup(self) -> None:
        _sleep.trim_backup()

    def empty_cache(self) -> None:
        sys.modules[__package__].empty_cache()

    def free_device_bytes(self) -> int:
        import torch

        return int(torch.cuda.mem_get_info()[0])

    def graph(self, cuda_graph: Any, pool: Any, stream: Any, capture_error_mode: str) -> Any:
        import torch

        return torch.cuda.graph(cuda_graph, pool=pool, stream=stream, capture_error_mode=capture_error_mode)
