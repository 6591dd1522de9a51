"""One PyTorch process for test_allocator.py: allocator objects, torch.cuda.MemPool, placement and
out-of-memory inside a pool. Prints one line ``GPUMEM_WORKER_RESULT {json}``.

Modes:
  current      change_current_allocator(gpumem_torch.allocator("pool")): the whole process
  mempool      a MemPool backed by --strategy: tensors inside come from gpumem's segments, the
               others from PyTorch's allocator; gpumem's numbers against pool.snapshot()
  two          two allocators with different strategies (uvm, and tiered with a 64 MiB device
               budget) serving a pool each in one process
  place        tiered: gpumem_torch.place("host") puts a block's segments on the host tier
  mempool_oom  out of memory inside a MemPool: torch.OutOfMemoryError (mempool entry point), then
               the raising entry point (torch.cuda.MemPool(alloc.allocator())): RuntimeError
"""

import argparse
import gc
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bindings/python
sys.path.insert(0, HERE)

import gpumem_torch  # noqa: E402
from oom_predicates import accepted_by_all  # noqa: E402

MiB = 1 << 20


def emit(result):
    sys.stdout.write("GPUMEM_WORKER_RESULT " + json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()


def segments_of(pool):
    snap = pool.snapshot()
    return snap["segments"] if isinstance(snap, dict) else snap


def inside_any(ptr, segments):
    return any(s["address"] <= ptr < s["address"] + s["total_size"] for s in segments)


def run_current(args, result):
    import torch

    alloc = gpumem_torch.allocator("pool")
    torch.cuda.memory.change_current_allocator(alloc)
    x = torch.ones(4 * MiB // 4, device="cuda")
    result["sum_ok"] = float(x.sum().item()) == float(MiB)
    result["allocated"] = alloc.raw_stats()["allocated_bytes"]
    result["instance"] = alloc.instance
    result["config"] = alloc.config()
    result["default_instance_active"] = gpumem_torch.raw_stats()["active"]
    del x
    gc.collect()
    torch.cuda.synchronize()
    result["allocated_after"] = alloc.raw_stats()["allocated_bytes"]


def run_mempool(args, result):
    import torch

    alloc = gpumem_torch.allocator(args.strategy)
    result["config"] = alloc.config()
    outside = torch.ones(MiB, device="cuda")
    pool = alloc.mem_pool()
    with torch.cuda.use_mem_pool(pool):
        inside = torch.ones(32 * MiB // 4, device="cuda")
        small = torch.ones(1000, device="cuda")
    torch.cuda.synchronize()
    segments = segments_of(pool)
    stats = alloc.raw_stats()
    result["pool_segment_bytes"] = sum(s["total_size"] for s in segments)
    result["pool_segments"] = len(segments)
    result["gpumem_allocated"] = stats["allocated_bytes"]
    result["gpumem_live_allocations"] = stats["alloc_count"] - stats["free_count"]
    result["gpumem_reserved"] = stats["reserved_bytes"]
    result["torch_reserved"] = torch.cuda.memory_reserved()
    result["inside_in_pool"] = inside_any(inside.data_ptr(), segments) and inside_any(small.data_ptr(), segments)
    result["outside_in_pool"] = inside_any(outside.data_ptr(), segments)
    result["sums_ok"] = float(inside.sum().item()) == float(32 * MiB // 4) and float(small.sum().item()) == 1000.0
    result["memory_stats"] = dict(alloc.memory_stats())
    del inside, small
    gc.collect()
    torch.cuda.synchronize()
    result["gpumem_allocated_after_del"] = alloc.raw_stats()["allocated_bytes"]  # PyTorch keeps its segments cached
    del pool
    gc.collect()
    torch.cuda.empty_cache()
    result["gpumem_allocated_after_pool_released"] = alloc.raw_stats()["allocated_bytes"]
    result["outside_ok"] = float(outside.sum().item()) == float(MiB)


def run_two(args, result):
    import torch

    uvm = gpumem_torch.allocator("uvm")
    tiered = gpumem_torch.allocator("tiered", tiered_device_budget="64MiB")
    result["instances"] = [uvm.instance, tiered.instance]
    result["configs"] = [uvm.config(), tiered.config()]
    pool_u, pool_t = uvm.mem_pool(), tiered.mem_pool()
    with torch.cuda.use_mem_pool(pool_u):
        a = torch.full((32 * MiB // 4,), 2.0, device="cuda")
    with torch.cuda.use_mem_pool(pool_t):
        b = torch.full((160 * MiB // 4,), 3.0, device="cuda")  # past the 64 MiB device budget: the host tier
    c = (a[: 1024] + b[: 1024]).sum()
    torch.cuda.synchronize()
    su, st = uvm.raw_stats(), tiered.raw_stats()
    result["uvm_allocated"] = su["allocated_bytes"]
    result["tiered_allocated"] = st["allocated_bytes"]
    result["tiered_host_allocated"] = st["host_allocated_bytes"]
    result["uvm_host_allocated"] = su["host_allocated_bytes"]
    result["sum_ok"] = float(c.item()) == 5.0 * 1024 and float(b.sum().item()) == 3.0 * (160 * MiB // 4)


def run_place(args, result):
    import torch

    tiered = gpumem_torch.allocator("tiered")
    pool = tiered.mem_pool()
    with torch.cuda.use_mem_pool(pool):
        with gpumem_torch.place("host"):
            h = torch.ones(16 * MiB // 4, device="cuda")
            result["placement_inside"] = gpumem_torch.thread_placement()
        after_host = tiered.raw_stats()
        d = torch.ones(16 * MiB // 4, device="cuda")
    torch.cuda.synchronize()
    after_device = tiered.raw_stats()
    result["placement_after"] = gpumem_torch.thread_placement()
    result["host_allocated_after_place"] = after_host["host_allocated_bytes"]
    result["host_allocated_after_device"] = after_device["host_allocated_bytes"]
    result["allocated_after_device"] = after_device["allocated_bytes"]
    result["h_bytes"] = h.untyped_storage().nbytes()
    result["sums_ok"] = float((h + d).sum().item()) == 2.0 * (16 * MiB // 4)


def oom_case(torch, pool, size):
    case = {}
    try:
        with torch.cuda.use_mem_pool(pool):
            torch.empty(size, dtype=torch.uint8, device="cuda")
        case["raised"] = None
    except Exception as e:  # noqa: BLE001
        case["raised"] = type(e).__name__
        case["is_torch_oom"] = isinstance(e, torch.OutOfMemoryError)
        case["message"] = str(e)
        case["accepted"] = accepted_by_all(e)
    case["last_error"] = gpumem_torch.last_error()
    with torch.cuda.use_mem_pool(pool):
        t = torch.ones(16 * MiB // 4, device="cuda")
        case["works_after"] = float(t.sum().item()) == float(16 * MiB // 4)
    return case


def run_mempool_oom(args, result):
    import torch

    alloc = gpumem_torch.allocator("pool", pool_max_reserved="256MiB")
    result["null_entry"] = oom_case(torch, alloc.mem_pool(), 512 * MiB)
    result["raising_entry"] = oom_case(torch, torch.cuda.MemPool(alloc.allocator()), 512 * MiB)
    result["num_ooms"] = alloc.memory_stats()["num_ooms"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True, choices=["current", "mempool", "two", "place", "mempool_oom"])
    p.add_argument("--strategy", default="uvm", choices=list(gpumem_torch.STRATEGIES))
    args = p.parse_args()
    result = {"mode": args.mode, "ok": False}
    try:
        {"current": run_current, "mempool": run_mempool, "two": run_two, "place": run_place, "mempool_oom": run_mempool_oom}[
            args.mode
        ](args, result)
        result["ok"] = True
    except Exception as e:  # noqa: BLE001
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc()
    emit(result)


if __name__ == "__main__":
    main()
