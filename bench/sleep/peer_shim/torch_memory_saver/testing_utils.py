"""The helpers the peer's examples import from its package's testing_utils, written for CUDA: the device
string, emptying the cache, and the device memory used (NVML's figure where PyTorch has it, as the peer
reads it, else total less free)."""

import gpumem_torch
import torch


def is_xpu():
    return False


def get_device():
    return "cuda"


def empty_cache():
    # torch.cuda.empty_cache() does nothing with a pluggable allocator: gpumem's own releases its cache.
    gpumem_torch.empty_cache()


def get_and_print_gpu_memory(message, gpu_id=0):
    try:
        mem = torch.cuda.device_memory_used(gpu_id)
    except (AttributeError, ModuleNotFoundError, RuntimeError):  # an older PyTorch, or no NVML binding
        free, total = torch.cuda.mem_get_info(gpu_id)
        mem = total - free
    print(f"GPU {gpu_id} memory: {mem / 1024 ** 3:.2f} GB ({message})")
    return mem
