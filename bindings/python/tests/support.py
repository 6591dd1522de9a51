"""Shared by the Python test modules: why PyTorch tests on a GPU cannot run here."""
import importlib.util


def torch_cuda_reason():
    """None when PyTorch is installed and sees a CUDA device, else the reason (for a skip message)."""
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed"
    try:
        import torch

        if not torch.cuda.is_available():
            return "PyTorch sees no CUDA device"
    except Exception as e:  # noqa: BLE001
        return f"PyTorch/CUDA unusable: {e}"
    return None
