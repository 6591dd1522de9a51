"""`import torch_memory_saver` resolved to gpumem's drop-in (gpumem_torch.saver), for running the peer's
own tests against it (bench/sleep/peer_tests.py puts this folder first on PYTHONPATH). Only the names
the peer's tests and examples import: the singleton, its class and configure_subprocess."""

from gpumem_torch.saver import MemorySaver as TorchMemorySaver  # noqa: F401
from gpumem_torch.saver import configure_subprocess  # noqa: F401
from gpumem_torch.saver import memory_saver as torch_memory_saver  # noqa: F401
