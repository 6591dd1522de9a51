"""Device memory a PyTorch program uses outside its allocator, measured on a GPU: the figures behind
the doctor's band (docs/doctor.md "Band").

Each repeat is a fresh process that records, after each stage, what the driver says is used
(cudaMemGetInfo: total - free) less what PyTorch's allocator has reserved: the CUDA context, then
cuBLAS's handle and workspace (the first fp32 and bf16 matrix products), cuBLASLt (addmm with a bias),
cuDNN (a convolution), a backward pass (autograd's streams), and NCCL (a one-rank process group, when
NCCL is there). Prints a table (median and range over the repeats) and writes the JSON.

    python3 bench/doctor/outside.py [--repeats 5] [--out bench/doctor/results/outside.json]"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from output import write_json  # noqa: E402

STAGES = ["context", "cublas fp32 matmul", "cublas bf16 matmul", "cublasLt addmm", "cudnn conv2d", "backward", "nccl"]


def worker() -> None:
    import torch

    dev = torch.device("cuda", 0)
    out = {}

    def mark(stage: str) -> None:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info(0)
        out[stage] = total - free - torch.cuda.memory_reserved(0)
        out["total"] = total

    torch.empty(1, device=dev)
    mark("context")
    a = torch.randn(4096, 4096, device=dev)
    (a @ a).sum().item()
    mark("cublas fp32 matmul")
    b = a.to(torch.bfloat16)
    (b @ b).float().sum().item()
    mark("cublas bf16 matmul")
    torch.addmm(torch.randn(4096, device=dev), a, a).sum().item()
    mark("cublasLt addmm")
    x = torch.randn(32, 64, 56, 56, device=dev)
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).to(dev)
    conv(x).sum().item()
    mark("cudnn conv2d")
    w = torch.randn(4096, 4096, device=dev, requires_grad=True)
    (a @ w).relu().sum().backward()
    mark("backward")
    try:
        import torch.distributed as dist

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29000 + os.getpid() % 1000))
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
        t = torch.ones(1 << 20, device=dev)
        dist.all_reduce(t)
        mark("nccl")
        dist.destroy_process_group()
    except Exception as e:  # no NCCL: the stage is left out, and said so
        out["nccl_error"] = f"{type(e).__name__}: {e}"
    print("RESULT " + json.dumps(out), flush=True)


def main() -> int:
    if "--worker" in sys.argv:
        worker()
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="bench/doctor/results/outside.json")
    a = ap.parse_args()
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    runs = []
    for i in range(a.repeats):
        p = subprocess.run([sys.executable, __file__, "--worker"], capture_output=True, text=True, env=env, timeout=300)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        if p.returncode != 0 or not line:
            sys.exit(f"outside: worker {i} failed (exit {p.returncode}): {p.stderr.strip()[-2000:]}")
        runs.append(json.loads(line[0][7:]))
        print(f"repeat {i + 1}/{a.repeats} done", file=sys.stderr)
    mib = 1 << 20
    rows = []
    print(f"{'after':22} {'outside the allocator (MiB)':>28}")
    for stage in STAGES:
        vals = [r[stage] for r in runs if stage in r]
        if not vals:
            print(f"{stage:22} {'not measured: ' + runs[0].get('nccl_error', 'absent'):>28}")
            continue
        med = statistics.median(vals)
        rows.append({"stage": stage, "median_bytes": med, "min_bytes": min(vals), "max_bytes": max(vals), "values": vals})
        print(f"{stage:22} {med / mib:>10.1f}   ({min(vals) / mib:.1f} – {max(vals) / mib:.1f})")
    import torch

    out = {"benchmark": "outside-allocator", "command": " ".join(sys.argv), "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name(0), "total_bytes": runs[0]["total"], "repeats": a.repeats, "stages": rows}
    write_json(a.out, out, log=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
