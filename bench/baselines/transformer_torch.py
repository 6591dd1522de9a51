"""The transformer workload in PyTorch, the baseline of `gpumem train --model transformer`: the same
GPT-style decoder (f32, TF32 off, eager), the same schedule of sequence lengths and batches and the same
tokens (transformer_data.py regenerates them from the seed with the workload's own generator), Adam.

  token and position embeddings; L pre-LN blocks: x += proj(attn(LN1(x))), x += fc_proj(gelu_tanh(fc(LN2(x))));
  attention: qkv = Linear(C, 3C), H heads, causal softmax(Q K^T / sqrt(D)) V (--attention eager: explicit
  matmuls, masked_fill and softmax, as gpumem computes it; sdpa: F.scaled_dot_product_attention(is_causal=True));
  final LayerNorm; the LM head tied to the token embedding; mean cross-entropy over all B*T targets.
  Init: weights N(0, 0.02), biases 0, LayerNorms 1 and 0. Adam (torch.optim.Adam, betas 0.9/0.999, eps 1e-8).

    python3 bench/baselines/transformer_torch.py --epochs 3 > torch-transformer.jsonl   # on the GPU host
    gpumem compare --model transformer --epochs 3 --baseline torch-transformer.jsonl
    python3 bench/baselines/transformer_torch.py --device cpu --epochs 1 --embed 32 --max-len 64   # a check without a GPU

Prints one JSON line per epoch (its steps' losses, times and shapes; the held-out loss and accuracy; the
epoch's peak allocated and reserved memory, on a GPU) and a closing summary line with the run's peaks; each step's
loss and time also go to stderr (each step is synchronised to time it; --no-step-sync times the epoch only, its steps
queued without a wait between them as gpumem's are). An epoch's tokens are generated before its clock starts (pure Python is
slower at it than the step itself); each step's upload is timed, as gpumem's is.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from transformer_data import DEFAULTS, MarkovChain, base_shapes, epoch_order, held_out_tokens, step_tokens


class Block(nn.Module):
    def __init__(self, embed, heads, context, attention):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.ln1 = nn.LayerNorm(embed)
        self.qkv = nn.Linear(embed, 3 * embed)
        self.proj = nn.Linear(embed, embed)
        self.ln2 = nn.LayerNorm(embed)
        self.fc = nn.Linear(embed, 4 * embed)
        self.fc_proj = nn.Linear(4 * embed, embed)
        if attention == 'eager':
            self.register_buffer('mask', torch.tril(torch.ones(context, context, dtype=torch.bool)), persistent=False)

    def attend(self, x):
        B, T, C = x.shape
        H, D = self.heads, C // self.heads
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in self.qkv(x).split(C, dim=2))
        if self.attention == 'sdpa':
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            att = att.masked_fill(~self.mask[:T, :T], float('-inf'))
            y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attend(self.ln1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate='tanh'))


class Transformer(nn.Module):
    def __init__(self, vocab, context, embed, heads, layers, attention):
        super().__init__()
        self.wte = nn.Embedding(vocab, embed)
        self.wpe = nn.Embedding(context, embed)
        self.blocks = nn.ModuleList(Block(embed, heads, context, attention) for _ in range(layers))
        self.lnf = nn.LayerNorm(embed)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, tokens):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.lnf(x) @ self.wte.weight.t()  # the head tied to the token embedding


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--epochs', type=int, default=3)
    ap.add_argument('--seed', type=int, default=0)
    for name in ['vocab', 'embed', 'heads', 'layers', 'context', 'min_len', 'max_len', 'min_batch', 'max_batch',
                 'steps_per_epoch']:
        ap.add_argument('--' + name.replace('_', '-'), type=int, default=DEFAULTS[name])
    ap.add_argument('--lr', type=float, default=DEFAULTS['lr'])
    ap.add_argument('--attention', choices=['eager', 'sdpa'], default='eager')
    ap.add_argument('--no-step-sync', dest='step_sync', action='store_false',
                    help='do not synchronise after every step (no step times): the epoch time of an unsynchronised loop')
    ap.add_argument('--device', default='cuda', help="'cuda' (default), 'cuda:N', or 'cpu' (no memory figures)")
    args = ap.parse_args()
    if args.embed % args.heads or not (args.min_len <= args.max_len <= args.context) or args.min_batch > args.max_batch:
        ap.error('embed must be a multiple of heads, min-len <= max-len <= context and min-batch <= max-batch')
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision('highest')
    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    cuda = dev.type == 'cuda'
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    model = Transformer(args.vocab, args.context, args.embed, args.heads, args.layers, args.attention).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    chain = MarkovChain(args.vocab, args.seed)
    shapes = base_shapes(args.min_len, args.max_len, args.min_batch, args.max_batch, args.steps_per_epoch, args.seed)
    held_inputs, held_targets = held_out_tokens(chain, args.seed, args.max_len, args.min_batch)
    held_x = torch.tensor(held_inputs, dtype=torch.long, device=dev).view(args.min_batch, args.max_len)
    held_y = torch.tensor(held_targets, dtype=torch.long, device=dev).view(-1)
    name = f'torch-{args.attention}'
    results = []
    for epoch in range(args.epochs):
        steps = []
        for s, i in enumerate(epoch_order(args.steps_per_epoch, args.seed, epoch)):
            length, batch = shapes[i]
            x, y = step_tokens(chain, args.seed, epoch * args.steps_per_epoch + s, length, batch)
            steps.append((length, batch, torch.tensor(x, dtype=torch.long).view(batch, length),
                          torch.tensor(y, dtype=torch.long).view(-1)))
        sync()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        losses, step_ms = [], []
        correct = torch.zeros((), dtype=torch.long, device=dev)
        for s, (length, batch, x, y) in enumerate(steps):
            if args.step_sync:
                sync()
                ts = time.perf_counter()
            x, y = x.to(dev), y.to(dev)
            opt.zero_grad(set_to_none=True)
            logits = model(x).view(-1, args.vocab)
            loss = F.cross_entropy(logits, y)
            correct += (logits.argmax(1) == y).sum()
            del logits
            loss.backward()
            opt.step()
            losses.append(loss.detach())
            if args.step_sync:
                sync()
                step_ms.append((time.perf_counter() - ts) * 1e3)
                print(f'epoch {epoch + 1} step {s + 1}: T {length} B {batch} loss {losses[-1].item():.4f} '
                      f'{step_ms[-1]:.2f} ms', file=sys.stderr, flush=True)
        with torch.no_grad():
            held_logits = model(held_x).view(-1, args.vocab)
            held_loss = F.cross_entropy(held_logits, held_y).item()
            held_acc = (held_logits.argmax(1) == held_y).float().mean().item()
            del held_logits
        sync()
        ms = (time.perf_counter() - t0) * 1e3
        losses = torch.stack(losses).tolist()  # read after the timing
        tokens = sum(length * batch for length, batch, _, _ in steps)
        rec = {'peer': name, 'epoch': epoch + 1, 'epoch_ms': ms, 'loss': sum(losses) / len(losses), 'accuracy': held_acc,
               'evaluation_loss': held_loss, 'train_accuracy': correct.item() / tokens, 'losses': losses,
               'shapes': [[length, batch] for length, batch, _, _ in steps], 'tokens': tokens}
        if step_ms:
            rec['step_ms'] = step_ms
        if cuda:
            rec.update(peak_allocated=torch.cuda.max_memory_allocated(), peak_reserved=torch.cuda.max_memory_reserved())
        results.append(rec)
        print(json.dumps(rec), flush=True)
    summary = {'peer': name, 'summary': True, 'mode': 'eager', 'variant': args.attention,
               'gpu': torch.cuda.get_device_name(dev) if cuda else 'none (cpu)', 'torch': torch.__version__}
    if cuda:
        summary.update(peak_allocated=max(r['peak_allocated'] for r in results),
                       peak_reserved=max(r['peak_reserved'] for r in results), reserved_at_end=torch.cuda.memory_reserved(dev))
    print(json.dumps(summary), flush=True)


if __name__ == '__main__':
    main()
