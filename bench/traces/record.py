#!/usr/bin/env python3
"""Records the allocation traces of bench/traces/: seven PyTorch workloads, each run twice in a
process of its own,

  gpumem  under libgpumem_torch.so (strategy pool) with GPUMEM_TRACE: gpumem's JSONL trace,
          NAME.gpumem.jsonl.gz
  torch   under PyTorch's caching allocator with torch.cuda.memory._record_memory_history():
          a memory snapshot (torch.cuda.memory._dump_snapshot), NAME.torch.pickle.gz

and writes manifest.json (versions, GPU, events and sizes of every file). Models are built from
their configurations with random weights and trained on random data: nothing is downloaded.

  python3 bench/traces/record.py                        # everything (an H100: about 10 minutes)
  python3 bench/traces/record.py --only gpt2_finetune --steps 5
  python3 bench/traces/record.py --only seed_gcn --modes gpumem

Workloads (--steps: the default in brackets):
  gpt2_finetune  GPT-2 style model (GPT2Config, 6 layers), AdamW, random token batches whose
                 sequence length (64..1024) and batch size change every step         [40 steps]
  resnet50       torchvision ResNet-50, SGD, batch 64 at 224x224                      [15 steps]
  graphsage      GraphSAGE (2 layers) on a random graph of 1M nodes, mini-batches from neighbour
                 sampling (torch_geometric's NeighborLoader, else a sampler in plain PyTorch)
                                                                                      [20 batches]
  seed_gcn       the seed GCN (bindings/python/seed_gcn.py), 2M nodes, full batch     [3 epochs]
  gpt2_generate  greedy generation with a growing KV cache (past_key_values), prompts of 32, 200
                 and 600 tokens                                                       [256 tokens]
  bert_mlm       BERT-base masked LM (BertConfig()), AdamW, sequence length 32..512 and batch
                 1..32 drawn every step                                               [40 steps]
  llama_finetune a small Llama-style decoder (8 layers, 1024 hidden) in bf16, AdamW, sequence
                 length 128..2048 and batch 1..8 drawn every step; PyTorch's allocator runs it
                 under expandable_segments:True (ALLOC_CONF)                          [30 steps]

Needs PyTorch with CUDA, transformers, torchvision, torch_geometric (optional: graphsage falls back
to plain PyTorch), and libgpumem_torch.so (native/build/Release, or $GPUMEM_TORCH_LIB).
"""

import argparse
import gzip
import json
import os
import pickle
import platform
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bindings", "python"))

WORKLOADS = {
    "gpt2_finetune": 40,
    "resnet50": 15,
    "graphsage": 20,
    "seed_gcn": 3,
    "gpt2_generate": 256,
    "bert_mlm": 40,
    "llama_finetune": 30,
}
MODES = ("gpumem", "torch")
# PyTorch's allocator settings a workload is recorded and run under (PYTORCH_CUDA_ALLOC_CONF in its
# torch-mode processes); the snapshot records them in its allocator_settings.
ALLOC_CONF = {"llama_finetune": "expandable_segments:True"}


# ---------------------------------------------------------------------------------------------
# The workloads (run in the worker process; `torch` is imported there, after the allocator is set).
# `on_step`, when given, is called at the end of every step with a 0-d tensor: the step's loss, or
# for gpt2_generate the largest logit of the forward's last position (bench/torch-live/run.py times
# steps and compares these). Recording passes none: nothing extra runs.


def gpt2_model(torch, dev):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=6, n_head=12, n_embd=768, n_positions=1024, vocab_size=50257)
    return GPT2LMHeadModel(config).to(dev), config


def variable_shape_training(torch, model, steps, info, on_step, seed, seq_range, batch_range, max_tokens, inputs):
    """AdamW (lr 1e-4) steps of `model` whose sequence length (seq_range, inclusive) and batch size
    (batch_range, at most max_tokens tokens) are drawn every step from a generator seeded `seed`;
    inputs(g, batch, seq) draws the step's model arguments from the same generator."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(seed)
    shapes = []
    for _ in range(steps):
        seq = int(torch.randint(seq_range[0], seq_range[1] + 1, (1,), generator=g))
        batch = max(1, min(int(torch.randint(batch_range[0], batch_range[1] + 1, (1,), generator=g)), max_tokens // seq))
        loss = model(**inputs(g, batch, seq)).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        shapes.append([batch, seq])
        if on_step is not None:
            on_step(loss)
    torch.cuda.synchronize()
    info["batches"] = shapes
    info["final_loss"] = float(loss)


def causal_lm_inputs(torch, dev, vocab_size):
    """inputs() of variable_shape_training for a causal language model: random tokens, labels the same."""

    def inputs(g, batch, seq):
        ids = torch.randint(0, vocab_size, (batch, seq), generator=g).to(dev)
        return {"input_ids": ids, "labels": ids}

    return inputs


def run_gpt2_finetune(torch, dev, steps, info, on_step=None):
    model, config = gpt2_model(torch, dev)
    variable_shape_training(torch, model, steps, info, on_step, seed=1, seq_range=(64, 1024), batch_range=(1, 16),
                            max_tokens=16384, inputs=causal_lm_inputs(torch, dev, config.vocab_size))


def run_resnet50(torch, dev, steps, info, on_step=None):
    import torchvision

    model = torchvision.models.resnet50(weights=None, num_classes=1000).to(dev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(steps):
        x = torch.randn(64, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (64,), device=dev)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if on_step is not None:
            on_step(loss)
    torch.cuda.synchronize()
    info["batch"] = 64
    info["final_loss"] = float(loss)


def sage_model(torch, features, hidden, classes):
    """torch_geometric's GraphSAGE when it imports, else the same model (mean aggregation, root
    weight) in plain PyTorch."""
    try:
        from torch_geometric.nn import GraphSAGE

        return GraphSAGE(features, hidden, num_layers=2, out_channels=classes), "torch_geometric.nn.GraphSAGE"
    except Exception:  # noqa: BLE001
        pass
    nn = torch.nn

    class Sage(nn.Module):
        def __init__(self, fin, fout):
            super().__init__()
            self.lin_l = nn.Linear(fin, fout)
            self.lin_r = nn.Linear(fin, fout, bias=False)

        def forward(self, x, edge_index):
            src, dst = edge_index
            agg = torch.zeros_like(x).index_add_(0, dst, x[src])
            deg = torch.zeros(x.size(0), device=x.device).index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
            return self.lin_l(agg / deg.clamp(min=1).unsqueeze(1)) + self.lin_r(x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = Sage(features, hidden)
            self.conv2 = Sage(hidden, classes)

        def forward(self, x, edge_index):
            return self.conv2(torch.relu(self.conv1(x, edge_index)), edge_index)

    return Net(), "plain PyTorch SAGE (mean)"


def plain_sampler(torch, n, src, dst, seeds_all, batch_size, fanouts, g):
    """Neighbour sampling in plain PyTorch, on the CPU: for each hop, `fanout` in-neighbours of
    every frontier node, drawn with replacement. Yields (n_id, edge_index, seed_positions)."""
    order = torch.argsort(dst)
    col = src[order]  # in-neighbours, grouped by destination
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    perm = seeds_all[torch.randperm(seeds_all.numel(), generator=g)]
    for start in range(0, perm.numel(), batch_size):
        seeds = perm[start : start + batch_size]
        frontier, edges_src, edges_dst = seeds, [], []
        for k in fanouts:
            deg = rowptr[frontier + 1] - rowptr[frontier]
            pick = (torch.rand(frontier.numel(), k, generator=g) * deg.unsqueeze(1)).long()
            idx = rowptr[frontier].unsqueeze(1) + pick
            keep = (deg > 0).unsqueeze(1).expand(-1, k)
            nbrs = col[idx[keep]]
            targets = frontier.unsqueeze(1).expand(-1, k)[keep]
            edges_src.append(nbrs)
            edges_dst.append(targets)
            frontier = torch.unique(nbrs)
        every = torch.cat([seeds] + edges_src + edges_dst)
        n_id, inverse = torch.unique(every, return_inverse=True)
        b, e = seeds.numel(), sum(t.numel() for t in edges_src)
        local_src, local_dst = inverse[b : b + e], inverse[b + e :]
        yield n_id, torch.stack([local_src, local_dst]), inverse[:b]


def run_graphsage(torch, dev, steps, info, on_step=None):
    n, avg_degree, features, hidden, classes = 1_000_000, 10, 128, 256, 10
    g = torch.Generator().manual_seed(2)
    src = torch.randint(0, n, (n * avg_degree,), generator=g)
    dst = torch.randint(0, n, (n * avg_degree,), generator=g)
    x = torch.randn(n, features, generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    train = torch.arange(n // 10)
    fanouts, batch_size = [15, 10], 1024
    model, model_name = sage_model(torch, features, hidden, classes)
    model = model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    batches = None
    try:
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader

        data = Data(x=x, y=y, edge_index=torch.stack([src, dst]), num_nodes=n)
        loader = NeighborLoader(data, num_neighbors=fanouts, batch_size=batch_size, input_nodes=train, shuffle=True)
        iterator = iter(loader)
        first = next(iterator)  # sampling needs pyg-lib or torch-sparse: fails here when neither is there

        def pyg_batches():
            yield first
            yield from iterator

        batches = ((b.x, b.edge_index, torch.arange(b.batch_size), b.y[: b.batch_size]) for b in pyg_batches())
        info["sampler"] = "torch_geometric.loader.NeighborLoader"
    except Exception as e:  # noqa: BLE001
        info["sampler"] = f"plain PyTorch (NeighborLoader unavailable: {type(e).__name__}: {str(e)[:200]})"
        batches = ((x[n_id], ei, pos, y[n_id[pos]]) for n_id, ei, pos in plain_sampler(torch, n, src, dst, train, batch_size, fanouts, g))
    info["model"] = model_name
    sizes = []
    model.train()
    for step, (bx, bei, pos, by) in enumerate(batches):
        if step >= steps:
            break
        bx, bei, pos, by = bx.to(dev), bei.to(dev), pos.to(dev), by.to(dev)
        loss = loss_fn(model(bx, bei)[pos], by)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sizes.append([int(bx.size(0)), int(bei.size(1))])
        if on_step is not None:
            on_step(loss)
    torch.cuda.synchronize()
    info["subgraphs_nodes_edges"] = sizes
    info["final_loss"] = float(loss)


def run_seed_gcn(torch, dev, steps, info, on_step=None):
    from seed_gcn import build_seed_gcn

    n, features, hidden, classes = 2_000_000, 128, 256, 10
    e = 10 * n
    g = torch.Generator(device=dev)
    g.manual_seed(0)
    src = torch.randint(0, n, (e,), device=dev, generator=g)
    dst = torch.randint(0, n, (e,), device=dev, generator=g)
    x = torch.randn(n, features, device=dev, generator=g)
    y = torch.randint(0, classes, (n,), device=dev, generator=g)
    model = build_seed_gcn(torch, features, hidden, classes).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(steps):
        model.train()
        opt.zero_grad(set_to_none=True)
        out = model(x, src, dst)
        loss = torch.nn.functional.cross_entropy(out[: n // 10], y[: n // 10])
        loss.backward()
        opt.step()
        del out
        if on_step is not None:
            on_step(loss)
    torch.cuda.synchronize()
    info["nodes"], info["edges"] = n, e
    info["final_loss"] = float(loss)


def run_gpt2_generate(torch, dev, steps, info, on_step=None):
    model, config = gpt2_model(torch, dev)
    model.eval()
    g = torch.Generator().manual_seed(3)
    prompts = [32, 200, 600]
    with torch.no_grad():
        for length in prompts:
            ids = torch.randint(0, config.vocab_size, (1, length), generator=g).to(dev)
            out = model(input_ids=ids, use_cache=True)
            past = out.past_key_values
            if on_step is not None:
                on_step(out.logits[0, -1].max())
            for _ in range(steps):
                token = out.logits[:, -1:].argmax(-1)
                out = model(input_ids=token, past_key_values=past, use_cache=True)
                past = out.past_key_values
                if on_step is not None:
                    on_step(out.logits[0, -1].max())
            del out, past
    torch.cuda.synchronize()
    info["prompt_lengths"] = prompts
    info["new_tokens"] = steps


def run_bert_mlm(torch, dev, steps, info, on_step=None):
    """BERT-base masked-language modelling: sequence length 32..512 and batch 1..32 (at most 8K tokens)
    drawn every step, 15% of the tokens masked, AdamW."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig()  # bert-base: 12 layers, 768 hidden, 30522 tokens
    model = BertForMaskedLM(config).to(dev)

    def inputs(g, batch, seq):
        ids = torch.randint(0, config.vocab_size, (batch, seq), generator=g)
        labels = torch.where(torch.rand(batch, seq, generator=g) < 0.15, ids, torch.full_like(ids, -100))
        return {"input_ids": ids.to(dev), "labels": labels.to(dev)}

    variable_shape_training(torch, model, steps, info, on_step, seed=2, seq_range=(32, 512), batch_range=(1, 32),
                            max_tokens=8192, inputs=inputs)


def run_llama_finetune(torch, dev, steps, info, on_step=None):
    """A small Llama-style decoder (8 layers, 1024 hidden, grouped-query attention) in bf16 with
    AdamW: sequence length 128..2048 and batch 1..8 (at most 8K tokens) drawn every step. Recorded
    and run under expandable_segments:True (ALLOC_CONF)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                         num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048)
    model = LlamaForCausalLM(config).to(dev, dtype=torch.bfloat16)
    variable_shape_training(torch, model, steps, info, on_step, seed=3, seq_range=(128, 2048), batch_range=(1, 8),
                            max_tokens=8192, inputs=causal_lm_inputs(torch, dev, config.vocab_size))


RUNNERS = {
    "gpt2_finetune": run_gpt2_finetune,
    "resnet50": run_resnet50,
    "graphsage": run_graphsage,
    "seed_gcn": run_seed_gcn,
    "gpt2_generate": run_gpt2_generate,
    "bert_mlm": run_bert_mlm,
    "llama_finetune": run_llama_finetune,
}


def versions():
    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "torchvision", "torch_geometric"):
        try:
            out[name] = __import__(name).__version__
        except Exception as e:  # noqa: BLE001
            out[name] = f"unavailable ({type(e).__name__})"
    return out


def worker(args):
    """One (workload, mode) in this process. Prints `RESULT {json}` last."""
    info = {"workload": args.worker, "mode": args.mode, "steps": args.steps}
    if args.mode == "gpumem":
        import gpumem_torch

        info["gpumem_config"] = gpumem_torch.enable("pool")  # GPUMEM_TRACE comes from the parent
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device")
    torch.manual_seed(0)
    dev = torch.device("cuda")
    if args.mode == "torch":
        torch.cuda.memory._record_memory_history(
            enabled="all", context=args.snapshot_context, stacks="python", max_entries=args.max_entries
        )
    start = time.perf_counter()
    RUNNERS[args.worker](torch, dev, args.steps, info)
    info["seconds"] = round(time.perf_counter() - start, 3)
    if args.mode == "torch":
        info["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        info["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        torch.cuda.memory._dump_snapshot(args.out_file)
        torch.cuda.memory._record_memory_history(enabled=None)
    else:
        import gpumem_torch

        s = gpumem_torch.memory_stats()
        info["peak_allocated_bytes"] = s["allocated_bytes.all.peak"]
        info["peak_reserved_bytes"] = s["reserved_bytes.all.peak"]
    info["gpu"] = torch.cuda.get_device_name(0)
    info["versions"] = versions()
    print("RESULT " + json.dumps(info), flush=True)
    # gpumem: the library completes the trace file when this process exits.


# ---------------------------------------------------------------------------------------------
# The driver


def gzip_file(path):
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.remove(path)
    return path + ".gz"


def count_events(path, mode):
    if mode == "gpumem":
        with open(path) as f:
            header = json.loads(f.readline())
            lines = sum(1 for line in f if line.strip())
        return {"events": lines, "header_event_count": header.get("eventCount"), "complete": header.get("eventCount") == lines}
    with open(path, "rb") as f:
        snapshot = pickle.load(f)  # plain Python objects: no torch needed to read it
    traces = snapshot.get("device_traces", [])
    return {"events": sum(len(t) for t in traces), "segments_at_end": len(snapshot.get("segments", []))}


def run_one(name, mode, steps, args):
    ext = "jsonl" if mode == "gpumem" else "pickle"
    out = os.path.join(args.out, f"{name}.{mode}.{ext}")
    for stale in (out, out + ".gz"):
        if os.path.exists(stale):
            os.remove(stale)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for key in [k for k in env if k.startswith("GPUMEM_")]:
        if key != "GPUMEM_TORCH_LIB":
            del env[key]
    if mode == "gpumem":
        env["GPUMEM_TRACE"] = out
        env["GPUMEM_ALLOCATOR"] = "pool"
    else:
        for key in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
            env.pop(key, None)
        if name in ALLOC_CONF:
            env["PYTORCH_CUDA_ALLOC_CONF"] = ALLOC_CONF[name]
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--mode", mode, "--steps", str(steps),
           "--out-file", out, "--max-entries", str(args.max_entries)]
    if args.snapshot_context:
        cmd += ["--snapshot-context", args.snapshot_context]
    print(f"== {name} / {mode} ({steps} steps)", flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    entry = {"workload": name, "mode": mode, "steps": steps, "command": args.command,
             "wall_seconds": round(time.perf_counter() - start, 1), "exit_code": proc.returncode}
    results = [line[7:] for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not results or not os.path.exists(out):
        entry["error"] = (proc.stderr or proc.stdout)[-3000:]
        print(f"   failed (exit {proc.returncode}):\n{entry['error']}", flush=True)
        return entry
    entry["result"] = json.loads(results[-1])
    entry.update(count_events(out, mode))
    entry["raw_bytes"] = os.path.getsize(out)
    gz = gzip_file(out)
    entry["file"] = os.path.relpath(gz, args.out)
    entry["bytes"] = os.path.getsize(gz)
    print(f"   {entry['events']:,} events, {entry['raw_bytes'] / 1e6:.1f} MB -> {gz} ({entry['bytes'] / 1e6:.2f} MB)", flush=True)
    return entry


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", help=f"comma-separated workloads (default: all of {', '.join(WORKLOADS)})")
    p.add_argument("--steps", type=int, help="steps (epochs, batches, tokens) for every workload chosen, instead of each one's default")
    p.add_argument("--modes", default=",".join(MODES), help="gpumem, torch or both (default)")
    p.add_argument("--out", default=HERE, help="output folder (default: bench/traces)")
    p.add_argument("--max-entries", type=int, default=5_000_000, help="torch mode: _record_memory_history's max_entries")
    p.add_argument("--snapshot-context", default=None, choices=["state", "alloc", "all"],
                   help="torch mode: record Python stacks too (larger files; default: none)")
    # Internal: one worker process.
    p.add_argument("--worker", choices=list(WORKLOADS), help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    p.add_argument("--out-file", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)

    names = list(WORKLOADS) if not args.only else [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown or any(m not in MODES for m in modes):
        p.error(f"unknown workload or mode: {unknown or modes}; workloads: {', '.join(WORKLOADS)}; modes: {', '.join(MODES)}")
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be at least 1")
    os.makedirs(args.out, exist_ok=True)
    if "gpumem" in modes:
        import gpumem_torch

        if not os.path.exists(gpumem_torch.library_path()):
            p.error(f"{gpumem_torch.library_path()} does not exist: build native/ first (npm run build:native)")

    args.command = " ".join(["python3", os.path.relpath(os.path.abspath(__file__), REPO)] + sys.argv[1:])
    manifest_path = os.path.join(args.out, "manifest.json")
    manifest = {"traces": []}
    if os.path.exists(manifest_path):  # a partial run (--only) updates its entries, keeps the others
        with open(manifest_path) as f:
            manifest = json.load(f)
    entries = {(t["workload"], t["mode"]): t for t in manifest.get("traces", [])}
    failed = 0
    for name in names:
        for mode in modes:
            entry = run_one(name, mode, args.steps or WORKLOADS[name], args)
            failed += "error" in entry
            entries[(name, mode)] = entry
    done = [e for e in entries.values() if "result" in e]
    manifest.update({
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": args.command,  # the last run; each trace names its own
        "host": platform.node(),
        "gpu": done[-1]["result"]["gpu"] if done else None,
        "versions": done[-1]["result"]["versions"] if done else versions(),
        "traces": sorted(entries.values(), key=lambda e: (list(WORKLOADS).index(e["workload"]), e["mode"])),
    })
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"wrote {manifest_path}; {failed} run(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
