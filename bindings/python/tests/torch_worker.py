"""One PyTorch process for test_torch.py: the allocator has to be chosen before CUDA is
initialised, so each strategy runs in a process of its own. Prints one line
``GPUMEM_WORKER_RESULT {json}`` (and nothing else on stdout).

Modes:
  train       train a small GCN (fixed seed, deterministic algorithms) and check the byte
              accounting against the live tensors' storage sizes (default)
  badenv      enable() with whatever GPUMEM_* the parent set: expect ValueError, then show that
              PyTorch still works with its own allocator
  direct      install the library with torch's CUDAPluggableAllocator directly (no enable(), so
              no validation up front) and allocate: a bad environment must surface as a Python
              exception naming the variable, not a crash
  late        initialise CUDA first, then enable(): expect RuntimeError
  oom         ask for far more memory than the GPU has: expect a Python exception, then keep
              working (free, allocate, compute)
"""

import argparse
import gc
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bindings/python

# Deterministic cuBLAS; must be set before CUDA is initialised.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import gpumem_torch  # noqa: E402
from seed_gcn import build_seed_gcn  # noqa: E402

sys.path.insert(0, HERE)
from oom_predicates import accepted_by_all  # noqa: E402


def emit(result):
    sys.stdout.write("GPUMEM_WORKER_RESULT " + json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()


def storage_bytes(tensors):
    """Sum of the distinct CUDA storages' nbytes (views share their base's storage)."""
    seen = {}
    for t in tensors:
        if not t.is_cuda:
            continue
        s = t.untyped_storage()
        if s.nbytes() == 0:
            continue
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def allocated(allocator):
    import torch

    if allocator == "torch":
        return torch.cuda.memory_allocated()
    return gpumem_torch.memory_stats()["allocated_bytes.all.current"]


def clear_library_workspaces():
    """PyTorch keeps cuBLAS / cuBLASLt workspaces allocated through the current allocator."""
    import torch

    for name in ("_cuda_clearCublasWorkspaces",):
        fn = getattr(torch._C, name, None)
        if fn is not None:
            fn()


def run_train(args, result):
    import torch

    dev = torch.device("cuda")
    result["torch_version"] = torch.__version__
    result["device_name"] = torch.cuda.get_device_name(0)

    # 1. Byte accounting before anything else (no cuBLAS workspace yet).
    if args.allocator != "torch":
        result["baseline_allocated"] = allocated(args.allocator)
    shapes = [
        ((1,), torch.uint8),
        ((3,), torch.float32),
        ((1000,), torch.float64),
        (((1 << 20) + 7,), torch.uint8),
        ((5_000_000,), torch.float32),
        ((17, 33), torch.float16),
        ((0,), torch.float32),
        ((0, 5), torch.int64),
        ((513,), torch.int32),
    ]
    tensors = [torch.full(shape, 1, dtype=dtype, device=dev) for shape, dtype in shapes]
    tensors.append(tensors[4][10:20])  # a view: no allocation of its own
    tensors.append(tensors[4].view(1000, 5000).t())
    torch.cuda.synchronize()
    expected = storage_bytes(tensors)
    result["accounting_expected"] = expected
    if args.allocator != "torch":
        stats = gpumem_torch.memory_stats()
        result["accounting_allocated"] = stats["allocated_bytes.all.current"]
        result["accounting_live_allocations"] = stats["allocation.all.current"]
        result["accounting_expected_count"] = len({t.untyped_storage().data_ptr() for t in tensors if t.untyped_storage().nbytes()})
        result["zero_size_allocs"] = stats["gpumem.zero_size_allocs"]
    del tensors
    gc.collect()
    torch.cuda.synchronize()
    if args.allocator != "torch":
        result["accounting_after_free"] = allocated(args.allocator)

    # 2. Training: deterministic, so every allocator must give the same losses bit for bit.
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    n, epn, features, hidden, classes = args.nodes, 10, 64, 128, 10
    g = torch.Generator(device=dev)
    g.manual_seed(args.seed)
    src = torch.randint(0, n, (n * epn,), device=dev, generator=g)
    dst = torch.randint(0, n, (n * epn,), device=dev, generator=g)
    x = torch.randn(n, features, device=dev, generator=g)
    y = torch.randint(0, classes, (n,), device=dev, generator=g)
    n_train = n // 10
    model = build_seed_gcn(torch, features, hidden, classes).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(args.steps):
        model.train()
        opt.zero_grad(set_to_none=True)
        out = model(x, src, dst)
        loss = torch.nn.functional.cross_entropy(out[:n_train], y[:n_train])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    del out, loss
    torch.cuda.synchronize()
    result["losses"] = [float(v).hex() for v in losses]
    result["losses_float"] = losses

    # A side stream: allocate and compute there, check the values.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a = torch.arange(1 << 20, device=dev, dtype=torch.float32)
        b = (a * 2).sum()
    side.synchronize()
    result["side_stream_ok"] = float(b.item()) == float((1 << 20) * ((1 << 20) - 1))
    del a, b

    if args.allocator != "torch":
        stats = gpumem_torch.memory_stats()
        result["train_stats"] = dict(stats)
        # 3. Delta accounting in the middle of a program.
        before = allocated(args.allocator)
        t = torch.empty(123457, dtype=torch.uint8, device=dev)  # noqa: F841  (held until the del below)
        result["delta_alloc"] = allocated(args.allocator) - before
        del t
        result["delta_after_free"] = allocated(args.allocator) - before
        # Peak reset.
        gpumem_torch.reset_peak_memory_stats()
        s = gpumem_torch.memory_stats()
        result["peak_after_reset_equals_current"] = s["allocated_bytes.all.peak"] == s["allocated_bytes.all.current"]
    else:
        result["train_stats"] = {
            "allocated_bytes.all.peak": torch.cuda.max_memory_allocated(),
            "reserved_bytes.all.peak": torch.cuda.max_memory_reserved(),
        }

    # 4. Free everything: allocated must return to 0.
    del model, opt, src, dst, x, y, side
    gc.collect()
    torch.cuda.synchronize()
    if args.allocator != "torch":
        result["allocated_before_workspace_clear"] = allocated(args.allocator)
    clear_library_workspaces()
    gc.collect()
    torch.cuda.synchronize()
    result["final_allocated"] = allocated(args.allocator)
    if args.allocator != "torch":
        gpumem_torch.empty_cache()
        s = gpumem_torch.memory_stats()
        result["final_stats"] = dict(s)
        result["config"] = gpumem_torch.config()


def run_badenv(args, result):
    import torch

    try:
        gpumem_torch.enable()
        result["raised"] = None
    except ValueError as e:
        result["raised"] = "ValueError"
        result["message"] = str(e)
    except Exception as e:  # noqa: BLE001
        result["raised"] = type(e).__name__
        result["message"] = str(e)
    result["cuda_initialized_after"] = torch.cuda.is_initialized()
    # PyTorch's own allocator still works in this process.
    t = torch.ones(1000, device="cuda")
    result["torch_still_works"] = float(t.sum().item()) == 1000.0


def run_direct(args, result):
    import torch

    alloc = torch.cuda.memory.CUDAPluggableAllocator(gpumem_torch.library_path(), "gpumem_malloc", "gpumem_free")
    torch.cuda.memory.change_current_allocator(alloc)
    try:
        torch.zeros(1000, device="cuda")
        result["raised"] = None
    except Exception as e:  # noqa: BLE001
        result["raised"] = type(e).__name__
        result["message"] = str(e)


def run_late(args, result):
    import torch

    torch.zeros(1, device="cuda")
    try:
        gpumem_torch.enable("pool")
        result["raised"] = None
    except RuntimeError as e:
        result["raised"] = "RuntimeError"
        result["message"] = str(e)


def run_oom(args, result):
    import torch

    keep = torch.ones(1 << 20, device="cuda")
    huge = 1 << 44  # 16 TiB
    try:
        torch.empty(huge, dtype=torch.uint8, device="cuda")
        result["raised"] = None
    except Exception as e:  # noqa: BLE001
        result["raised"] = type(e).__name__
        result["is_runtime_error"] = isinstance(e, RuntimeError)
        result["message"] = str(e)
        result["accepted"] = accepted_by_all(e)
    stats = gpumem_torch.memory_stats()
    result["num_ooms"] = stats["num_ooms"]
    result["last_error"] = gpumem_torch.last_error()
    # Still usable afterwards.
    t = torch.ones(1 << 20, device="cuda")
    result["works_after"] = float((t + keep).sum().item()) == float(2 << 20)
    del t, keep
    gc.collect()
    torch.cuda.synchronize()
    result["allocated_after"] = gpumem_torch.memory_stats()["allocated_bytes.all.current"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--allocator", default="pool", choices=["torch"] + list(gpumem_torch.STRATEGIES))
    p.add_argument("--mode", default="train", choices=["train", "badenv", "direct", "late", "oom"])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--nodes", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    result = {"allocator": args.allocator, "mode": args.mode, "ok": False}
    try:
        if args.mode == "train" and args.allocator != "torch":
            result["config"] = gpumem_torch.enable(args.allocator)
            result["driver_version"] = gpumem_torch.driver_info()["version"]  # as gpumem sees it (GPUMEM_CUDA_DRIVER)
        elif args.mode == "oom":
            result["config"] = gpumem_torch.enable(args.allocator)
        {"train": run_train, "badenv": run_badenv, "direct": run_direct, "late": run_late, "oom": run_oom}[args.mode](
            args, result
        )
        result["ok"] = True
    except Exception as e:  # noqa: BLE001
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc()
    emit(result)


if __name__ == "__main__":
    main()
