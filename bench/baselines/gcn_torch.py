"""gcn-seed in PyTorch, the baselines of `gpumem train --model gcn`: the seed's random graph (N nodes,
10N random directed edges, 128 random features, 10 random labels, train mask = first N/10), a
2-layer GCN (hidden 256, ReLU, dropout 0.5, Adam lr 0.01), full batch. Variants:

  index_add  the seed's own: h = x W; messages h[src] (E x hidden); index_add_ at dst
  pyg        torch_geometric's GCNConv (its default normalisation and self loops)
  sparse     a torch.sparse CSR product (the same sum as index_add, no E x hidden temporary)

    python3 bench/baselines/gcn_torch.py --nodes 2000000 --variant index_add --epochs 10
Prints one JSON line per epoch (after a warm-up epoch) and a summary line.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class IndexAddConv(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.lin = nn.Linear(i, o)

    def forward(self, x, src, dst):
        h = self.lin(x)
        return torch.zeros_like(h).index_add_(0, dst, h[src])


class SparseConv(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.lin = nn.Linear(i, o)

    def forward(self, x, adj):
        return adj @ self.lin(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--nodes', type=int, default=2_000_000)
    ap.add_argument('--edges-per-node', type=int, default=10)
    ap.add_argument('--features', type=int, default=128)
    ap.add_argument('--hidden', type=int, default=256)
    ap.add_argument('--classes', type=int, default=10)
    ap.add_argument('--epochs', type=int, default=10)
    ap.add_argument('--variant', choices=['index_add', 'pyg', 'sparse'], default='index_add')
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    dev = torch.device('cuda')
    n, e = args.nodes, args.nodes * args.edges_per_node
    src = torch.randint(0, n, (e,), device=dev)
    dst = torch.randint(0, n, (e,), device=dev)
    x = torch.randn(n, args.features, device=dev)
    y = torch.randint(0, args.classes, (n,), device=dev)
    train = torch.arange(n // 10, device=dev)
    if args.variant == 'pyg':
        from torch_geometric.nn import GCNConv
        edge_index = torch.stack([src, dst])
        c1, c2 = GCNConv(args.features, args.hidden).to(dev), GCNConv(args.hidden, args.classes).to(dev)
        run = lambda h: c2(F.dropout(F.relu(c1(h, edge_index)), 0.5, True), edge_index)
    elif args.variant == 'sparse':
        order = torch.argsort(dst * n + src)
        adj = torch.sparse_coo_tensor(torch.stack([dst[order], src[order]]), torch.ones(e, device=dev), (n, n)).coalesce().to_sparse_csr()
        c1, c2 = SparseConv(args.features, args.hidden).to(dev), SparseConv(args.hidden, args.classes).to(dev)
        run = lambda h: c2(F.dropout(F.relu(c1(h, adj)), 0.5, True), adj)
    else:
        c1, c2 = IndexAddConv(args.features, args.hidden).to(dev), IndexAddConv(args.hidden, args.classes).to(dev)
        run = lambda h: c2(F.dropout(F.relu(c1(h, src, dst)), 0.5, True), src, dst)
    params = list(c1.parameters()) + list(c2.parameters())
    opt = torch.optim.Adam(params, lr=0.01)
    results = []
    for epoch in range(args.epochs + 1):
        torch.cuda.synchronize()
        if epoch == 1:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(run(x)[train], y[train])
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        if epoch == 0:
            continue  # warm-up
        rec = {'peer': f'torch-{args.variant}', 'epoch': epoch, 'epoch_ms': ms, 'loss': loss.item(),
               'peak_allocated': torch.cuda.max_memory_allocated(), 'peak_reserved': torch.cuda.max_memory_reserved()}
        results.append(rec)
        print(json.dumps(rec), flush=True)
    ms = sorted(r['epoch_ms'] for r in results)
    print(json.dumps({'peer': f'torch-{args.variant}', 'summary': True, 'nodes': n, 'gpu': torch.cuda.get_device_name(),
                      'torch': torch.__version__, 'median_epoch_ms': ms[len(ms) // 2],
                      'peak_allocated': max(r['peak_allocated'] for r in results),
                      'peak_reserved': max(r['peak_reserved'] for r in results)}), flush=True)


if __name__ == '__main__':
    main()
