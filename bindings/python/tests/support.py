"""Shared by the Python test modules: why their tests cannot run here (no built library, no PyTorch
on a CUDA device), the fresh interpreters they run the library in (its configuration and the
process tag are per process), and the bench scripts they load by path."""
import importlib.util
import json
import os
import subprocess
import sys

WORKER_RESULT = "GPUMEM_WORKER_RESULT "


def load_script(name, path):
    """A script that is not a package's module (bench/...), loaded from its path as module `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def library_reason():
    """None when libgpumem_torch.so is where gpumem_torch loads it from, else the reason."""
    import gpumem_torch

    path = gpumem_torch.library_path()
    if os.path.exists(path):
        return None
    return f"libgpumem_torch.so not found at {path} (build native/ with CUDA or set GPUMEM_TORCH_LIB)"


def skip_reasons(module, torch_tests):
    """(the library's reason, PyTorch's reason) for the skips of `module`'s tests, None where they
    run; each reason is said once on stderr. PyTorch's tests need the library too."""
    lib = library_reason()
    torch = torch_cuda_reason() or lib
    if lib:
        print(f"[{module}] library tests skipped: {lib}", file=sys.stderr)
    if torch:
        print(f"[{module}] {torch_tests} skipped: {torch}", file=sys.stderr)
    return lib, torch


def clean_env(**overrides):
    """This process's environment without its GPUMEM_ settings, GPUMEM_TORCH_LIB set to the library
    gpumem_torch loads, then `overrides`."""
    import gpumem_torch

    env = {k: v for k, v in os.environ.items() if not (k.startswith("GPUMEM_") and k != "GPUMEM_TORCH_LIB")}
    env["GPUMEM_TORCH_LIB"] = gpumem_torch.library_path()
    env.update(overrides)
    return env


def run_code(code, env, path):
    """Runs `code` in a fresh interpreter with `env`, each folder of `path` put first on its sys.path
    in turn; returns the JSON of the last line it prints. AssertionError, with its output, where it
    fails or prints nothing."""
    head = "import sys; " + "; ".join(f"sys.path.insert(0, {folder!r})" for folder in path) + "\n"
    proc = subprocess.run([sys.executable, "-c", head + code], capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def worker_result(stdout):
    """The JSON of a worker's first `GPUMEM_WORKER_RESULT {json}` line in `stdout`, or None."""
    for line in stdout.splitlines():
        if line.startswith(WORKER_RESULT):
            return json.loads(line[len(WORKER_RESULT) :])
    return None
