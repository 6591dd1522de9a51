"""mlp-seed in PyTorch, the baseline of `gpumem train --model mlp`: 4 hidden layers of 784, ReLU,
10-way softmax, batch 64, SGD lr 0.1, data already on the GPU, each epoch shuffled and followed by
validation on the test set. Modes: eager, and torch.compile(mode='reduce-overhead').

    python3 bench/baselines/mlp_torch.py --epochs 3 --mode eager|compile
Prints one JSON line per epoch and a final summary line.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from mnist_idx import load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--epochs', type=int, default=3)
    ap.add_argument('--mode', choices=['eager', 'compile'], default='eager')
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    dev = torch.device('cuda')
    xtr, ytr, xte, yte = (torch.from_numpy(a).to(dev) for a in load())
    model = nn.Sequential(nn.Linear(784, 784), nn.ReLU(), nn.Linear(784, 784), nn.ReLU(), nn.Linear(784, 784), nn.ReLU(),
                          nn.Linear(784, 784), nn.ReLU(), nn.Linear(784, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    def evaluate(x):
        with torch.no_grad():
            return model(x).argmax(1)

    if args.mode == 'compile':
        step = torch.compile(step, mode='reduce-overhead')
        evaluate = torch.compile(evaluate, mode='reduce-overhead')
    # CUDA graphs (reduce-overhead) reuse their output buffers: mark each step and keep a copy.
    mark = torch.compiler.cudagraph_mark_step_begin if args.mode == 'compile' else (lambda: None)
    n, batch = xtr.shape[0], 64
    results = []
    for epoch in range(args.epochs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        perm = torch.randperm(n, device=dev)
        losses = []
        for i in range(0, n, batch):
            idx = perm[i:i + batch]
            mark()
            losses.append(step(xtr[idx], ytr[idx]).clone())
        correct = 0
        for i in range(0, xte.shape[0], 1000):
            mark()
            correct += (evaluate(xte[i:i + 1000]) == yte[i:i + 1000]).sum()
        acc = (correct.float() / xte.shape[0]).item()
        loss = torch.stack(losses).mean().item()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        # every step's loss (read after the timing): `gpumem compare --baseline` overlays them per step
        rec = {'peer': f'torch-{args.mode}', 'epoch': epoch + 1, 'epoch_ms': ms, 'loss': loss, 'accuracy': acc,
               'losses': torch.stack(losses).tolist(),
               'peak_allocated': torch.cuda.max_memory_allocated(), 'peak_reserved': torch.cuda.max_memory_reserved()}
        results.append(rec)
        print(json.dumps(rec), flush=True)
    print(json.dumps({'peer': f'torch-{args.mode}', 'summary': True, 'gpu': torch.cuda.get_device_name(),
                      'torch': torch.__version__, 'epochs': results}), flush=True)


if __name__ == '__main__':
    main()
