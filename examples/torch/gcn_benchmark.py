#!/usr/bin/env python3
"""The seed's PyTorch GCN benchmark under gpumem's allocators or PyTorch's own.

A random graph of N nodes and edges-per-node * N directed edges (src, dst uniform), random
features (randn) and labels (10 classes); the first N/10 nodes are the training set. A 2-layer
GCN written with plain torch ops, each layer

    h = x @ W;  messages = h[src]  (E x out, materialised);
    out = zeros(N, out).index_add_(0, dst, messages) + b

conv1 -> ReLU -> dropout(0.5) -> conv2 -> cross-entropy on the training nodes; Adam (lr 0.01),
full batch. Prints the time of every epoch (CUDA-synchronised; the first one is the warm-up and is
reported apart), the peak memory statistics, and at the end one line ``RESULT {json}``.

    python3 examples/torch/gcn_benchmark.py --allocator pool
    python3 examples/torch/gcn_benchmark.py --allocator torch --nodes 200000

--allocator torch is PyTorch's caching allocator (peaks from torch.cuda.max_memory_*);
cuda / uvm / pool / async are gpumem's strategies through libgpumem_torch.so (peaks from
gpumem_torch.memory_stats()). For uvm the run is refused unless the estimated peak fits in the
GPU's free memory (--allow-oversubscription lifts both this check and the library's cap).
"""

import argparse
import json
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bindings", "python"))

from seed_gcn import build_seed_gcn  # noqa: E402

GIB = 1 << 30


def estimate_peak_bytes(n, e, features, hidden, classes):
    """A conservative estimate of the training step's peak. Measured on an H100 at 2M nodes
    (torch 2.11): 44.5 GB, of which two E x hidden float tensors (the messages' gradient and the
    buffers of h[src]'s backward, 41 GB) are live at once. Counted here: those two, three
    N x hidden activations/gradients, the inputs, the edge index with its sort buffers, plus 10%."""
    f4, i8 = 4, 8
    b = 2 * e * hidden * f4  # grad of the messages + index_put_'s buffers in backward
    b += 3 * n * hidden * f4  # h, out / relu / dropout, grads
    b += 2 * n * features * f4  # x and its matmul's saved input
    b += 6 * e * i8  # src, dst, sort keys and permutation in backward
    b += 2 * e * classes * f4 + 4 * n * classes * f4
    return int(b * 1.10)


def fmt_gib(b):
    return f"{b / GIB:.2f} GiB"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=2_000_000)
    p.add_argument("--edges-per-node", type=int, default=10)
    p.add_argument("--features", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--allocator", default="torch", choices=["torch", "cuda", "uvm", "pool", "async"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--allow-oversubscription",
        action="store_true",
        help="uvm: run even if the estimated peak exceeds the free GPU memory (sets GPUMEM_UVM_LIMIT=none)",
    )
    args = p.parse_args()
    if args.epochs < 2:
        p.error("--epochs must be at least 2 (the first one is the warm-up)")

    gpumem_torch = None
    config = "torch caching allocator"
    if args.allocator != "torch":
        import gpumem_torch  # noqa: F811

        options = {}
        if args.allocator == "uvm" and args.allow_oversubscription:
            options["uvm_limit"] = "none"
        try:
            config = gpumem_torch.enable(args.allocator, **options)
        except (ValueError, RuntimeError, FileNotFoundError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2

    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        print("error: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    n, e = args.nodes, args.nodes * args.edges_per_node
    free0, total = torch.cuda.mem_get_info()
    estimate = estimate_peak_bytes(n, e, args.features, args.hidden, args.classes)
    print(
        f"gcn: {n:,} nodes, {e:,} edges, {args.features} features, hidden {args.hidden}, "
        f"{args.classes} classes, {args.epochs} epochs; allocator {args.allocator} ({config})"
    )
    print(
        f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; free {fmt_gib(free0)} of "
        f"{fmt_gib(total)}; estimated peak {fmt_gib(estimate)}"
    )
    if args.allocator == "uvm" and estimate > free0 and not args.allow_oversubscription:
        print(
            f"error: uvm: the estimated peak ({fmt_gib(estimate)}) exceeds the GPU's free memory "
            f"({fmt_gib(free0)}); managed memory past it would be oversubscribed. Use fewer --nodes, "
            "or --allow-oversubscription if that is what you want",
            file=sys.stderr,
        )
        return 3

    torch.manual_seed(args.seed)
    g = torch.Generator(device=dev)
    g.manual_seed(args.seed)
    t0 = time.perf_counter()
    src = torch.randint(0, n, (e,), device=dev, generator=g)
    dst = torch.randint(0, n, (e,), device=dev, generator=g)
    x = torch.randn(n, args.features, device=dev, generator=g)
    y = torch.randint(0, args.classes, (n,), device=dev, generator=g)
    n_train = n // 10
    model = build_seed_gcn(torch, args.features, args.hidden, args.classes).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    torch.cuda.synchronize()
    setup_s = time.perf_counter() - t0

    if gpumem_torch is not None:
        gpumem_torch.reset_peak_stats()
    else:
        torch.cuda.reset_peak_memory_stats()

    times, losses = [], []
    for epoch in range(args.epochs):
        torch.cuda.synchronize()
        start = time.perf_counter()
        model.train()
        opt.zero_grad(set_to_none=True)
        out = model(x, src, dst)
        loss = F.cross_entropy(out[:n_train], y[:n_train])
        loss.backward()
        opt.step()
        del out
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        losses.append(loss.item())
        del loss
        tag = " (warm-up)" if epoch == 0 else ""
        print(f"epoch {epoch + 1:3d}: {elapsed * 1000:9.1f} ms  loss {losses[-1]:.5f}{tag}")

    steady = times[1:]
    free_end, _ = torch.cuda.mem_get_info()
    if gpumem_torch is not None:
        s = gpumem_torch.memory_stats()
        peak_alloc, peak_reserved = s["allocated_bytes.all.peak"], s["reserved_bytes.all.peak"]
        extra = {
            "num_device_alloc": s["num_device_alloc"],
            "num_device_free": s["num_device_free"],
            "allocations": s["allocation.all.allocated"],
        }
    else:
        peak_alloc, peak_reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
        s = torch.cuda.memory_stats()
        extra = {
            "num_device_alloc": s.get("num_device_alloc"),
            "num_device_free": s.get("num_device_free"),
            "allocations": s.get("allocation.all.allocated"),
        }
    result = {
        "allocator": args.allocator,
        "config": config,
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "nodes": n,
        "edges": e,
        "features": args.features,
        "hidden": args.hidden,
        "epochs": args.epochs,
        "seed": args.seed,
        "setup_s": round(setup_s, 4),
        "warmup_epoch_ms": round(times[0] * 1000, 2),
        "epoch_ms_mean": round(statistics.mean(steady) * 1000, 2),
        "epoch_ms_median": round(statistics.median(steady) * 1000, 2),
        "epoch_ms_min": round(min(steady) * 1000, 2),
        "epoch_ms": [round(t * 1000, 2) for t in times],
        "losses": [round(v, 6) for v in losses],
        "peak_allocated_bytes": peak_alloc,
        "peak_reserved_bytes": peak_reserved,
        "estimated_peak_bytes": estimate,
        "free_bytes_start": free0,
        "device_used_end_bytes": total - free_end,
        **extra,
    }
    print(
        f"time per epoch (epochs 2-{args.epochs}): mean {result['epoch_ms_mean']:.1f} ms, median "
        f"{result['epoch_ms_median']:.1f} ms; warm-up {result['warmup_epoch_ms']:.1f} ms"
    )
    print(f"peak allocated {fmt_gib(peak_alloc)}, peak reserved {fmt_gib(peak_reserved)}")
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
