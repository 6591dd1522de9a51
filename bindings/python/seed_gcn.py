"""The seed's 2-layer GCN in plain PyTorch, shared by the example benchmark and the tests.

Each layer is h = x @ W; messages = h[src] (an E x out tensor, materialised);
out = zeros(N, out).index_add_(0, dst, messages) + b. The model is conv1 -> ReLU -> dropout(0.5) -> conv2.
"""


def build_seed_gcn(torch, features, hidden, classes):
    """A fresh model (on the CPU; move it with .to(device)). `torch` is passed in so that this
    module can be imported where PyTorch is not installed."""
    nn = torch.nn

    class Conv(nn.Module):
        def __init__(self, fin, fout):
            super().__init__()
            self.lin = nn.Linear(fin, fout, bias=False)
            self.bias = nn.Parameter(torch.zeros(fout))

        def forward(self, x, src, dst):
            h = self.lin(x)
            messages = h[src]
            out = torch.zeros(x.size(0), h.size(1), device=x.device, dtype=h.dtype).index_add_(0, dst, messages)
            return out + self.bias

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = Conv(features, hidden)
            self.conv2 = Conv(hidden, classes)

        def forward(self, x, src, dst):
            h = torch.relu(self.conv1(x, src, dst))
            h = torch.nn.functional.dropout(h, p=0.5, training=self.training)
            return self.conv2(h, src, dst)

    return Net()
