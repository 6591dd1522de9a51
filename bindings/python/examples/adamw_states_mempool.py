#!/usr/bin/env python3
"""AdamW's optimizer states in a torch.cuda.MemPool backed by gpumem ('tiered' or 'uvm'), the rest of
the model on the device under PyTorch's own allocator: a model whose parameters, gradients and
AdamW states together do not fit on the GPU trains anyway.

Sizes come from torch.cuda.mem_get_info(): parameters take --fraction of the free device memory
(default 0.3), gradients as much again, and AdamW's two states (exp_avg, exp_avg_sq) twice that, so
that everything on the device would need 4 x 0.3 = 1.2 times the free memory. The states (at most
--host-limit-gib, default 100 GiB, of host memory) go to the pool:

  tiered  device memory up to a budget (what is left after the model, less --headroom-gib), then
          mapped pinned host memory that kernels read and write in place; never more pinned memory
          than the host can spare.
  uvm     managed memory advised to live on the host (cudaMemAdviseSetPreferredLocation host,
          accessed by the device) and not prefetched; capped at the states' size. Managed memory
          past the device's free memory is the point of this variant (explicit oversubscription).

    python3 adamw_states_mempool.py --strategy tiered
    python3 adamw_states_mempool.py --strategy tiered --place host   # every state on the host tier
    python3 adamw_states_mempool.py --strategy uvm --steps 3

Prints gpumem's statistics for the pool's allocator beside PyTorch's view of the same memory
(pool.snapshot(), torch.cuda.memory_reserved()/memory_allocated()): see docs/torch.md,
"gpumem's statistics and PyTorch's in a MemPool".
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bindings/python, when run from a checkout

import gpumem_torch  # noqa: E402

GiB = 1 << 30


def host_available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def gib(n):
    return f"{n / GiB:.2f} GiB"


def init_adamw_state(optimizer, torch):
    """Creates AdamW's per-parameter state as its first step() would (step on the CPU, exp_avg and
    exp_avg_sq like the parameter), so that it can be made inside the pool while step()'s own
    temporaries stay on the device."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            optimizer.state[p] = {
                "step": torch.tensor(0.0, dtype=torch.float32),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategy", choices=["tiered", "uvm"], default="tiered")
    ap.add_argument("--fraction", type=float, default=0.3, help="parameters' share of the free device memory (0.05..0.45)")
    ap.add_argument("--dim", type=int, default=8192, help="width of each square Linear layer")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--host-limit-gib", type=float, default=100.0, help="most host memory the states may take")
    ap.add_argument("--headroom-gib", type=float, default=4.0, help="tiered: device memory left out of its budget")
    ap.add_argument("--place", choices=["auto", "host"], default="auto",
                    help="tiered: 'auto' fills the device budget first, then spills; 'host' makes the states "
                         "inside gpumem_torch.place('host')")
    args = ap.parse_args()
    if not 0.05 <= args.fraction <= 0.45:
        ap.error("--fraction must be within 0.05 and 0.45 (parameters and gradients must fit on the device)")

    import torch

    if not torch.cuda.is_available():
        sys.exit("this example needs a CUDA device")
    free, total = torch.cuda.mem_get_info()
    layer_bytes = args.dim * args.dim * 4
    host_room = min(int(args.host_limit_gib * GiB), int(host_available_bytes() * 0.8))
    param_bytes = min(int(free * args.fraction), host_room // 2)  # states are twice the parameters
    layers = max(1, param_bytes // layer_bytes)
    param_bytes = layers * layer_bytes
    state_bytes = 2 * param_bytes
    print(f"device: {torch.cuda.get_device_name()} {gib(total)} total, {gib(free)} free; host: {gib(host_available_bytes())} available")
    print(f"model: {layers} x Linear({args.dim}, {args.dim}) fp32 = {gib(param_bytes)} of parameters, as much of gradients, "
          f"{gib(state_bytes)} of AdamW states: {gib(2 * param_bytes + state_bytes)} in all against {gib(free)} free")

    model = torch.nn.Sequential(*[torch.nn.Linear(args.dim, args.dim, bias=False) for _ in range(layers)]).cuda()
    for p in model.parameters():
        # Variance-preserving weights: with Linear's default init a deep linear stack shrinks its
        # output by ~0.58 a layer, and the loss of a hundred layers underflows to zero.
        torch.nn.init.normal_(p, std=args.dim ** -0.5)
        p.grad = torch.zeros_like(p)  # gradients stay allocated (zero_grad(set_to_none=False))
    torch.cuda.synchronize()
    free_after_model, _ = torch.cuda.mem_get_info()

    if args.strategy == "tiered":
        budget = max(0, free_after_model - int(args.headroom_gib * GiB))
        alloc = gpumem_torch.allocator("tiered", tiered_device_budget=budget, tiered_host_budget=host_room)
    else:
        # Managed memory kept on the host and read in place; its cap is the states' size (+ slack for
        # PyTorch's segment rounding), past the device's free memory on purpose.
        alloc = gpumem_torch.allocator("uvm", uvm_advise="host", uvm_prefetch=False, uvm_limit=state_bytes + GiB)
    print(f"pool allocator: {alloc.config()}")

    # foreach=False: the update's temporaries are one parameter's size, on the device (the foreach
    # path would allocate a whole parameter-sized list at once).
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, foreach=False)
    pool = alloc.mem_pool()
    t0 = time.perf_counter()
    with torch.cuda.use_mem_pool(pool), gpumem_torch.place(args.place):
        init_adamw_state(optimizer, torch)
    torch.cuda.synchronize()
    print(f"states made in the pool in {time.perf_counter() - t0:.1f} s")

    x = torch.randn(args.batch, args.dim, device="cuda")
    losses = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        torch.cuda.synchronize()
        losses.append(loss.item())
        print(f"step {step + 1}: loss {losses[-1]:.6e}, {time.perf_counter() - t0:.2f} s")
    if not all(torch.isfinite(torch.tensor(losses))):
        sys.exit(f"losses are not finite: {losses}")

    # gpumem's view of the pool's memory against PyTorch's.
    stats = alloc.memory_stats()
    segments = pool.snapshot()
    segments = segments["segments"] if isinstance(segments, dict) else segments
    seg_total = sum(s["total_size"] for s in segments)
    seg_allocated = sum(s["allocated_size"] for s in segments)
    print("\nthe pool, as gpumem sees it (alloc.memory_stats()):")
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                "allocation.all.current", "num_device_alloc", "num_ooms",
                "gpumem.host_allocated_bytes.current", "gpumem.host_reserved_bytes.current"):
        if key in stats:
            value = stats[key]
            print(f"  {key:38} {gib(value) if 'bytes' in key else value}")
    print("the pool, as PyTorch sees it:")
    print(f"  pool.snapshot(): {len(segments)} segments, {gib(seg_total)} (= gpumem's allocated bytes), "
          f"{gib(seg_allocated)} of it in tensors")
    print(f"  torch.cuda.memory_reserved():  {gib(torch.cuda.memory_reserved())} (model, gradients and the pool's segments, "
          "wherever gpumem put them)")
    print(f"  torch.cuda.memory_allocated(): {gib(torch.cuda.memory_allocated())}")
    free_now, _ = torch.cuda.mem_get_info()
    print(f"  device free now: {gib(free_now)}")
    if seg_total != stats["allocated_bytes.all.current"]:
        sys.exit(f"gpumem's allocated bytes {stats['allocated_bytes.all.current']} differ from the pool's segments {seg_total}")


if __name__ == "__main__":
    main()
