#!/usr/bin/env python3
"""An RL-style loop on one GPU under gpumem_torch.enable(): generation (rollouts with a KV cache) and
training (AdamW) take turns on one GPT-2 style model, and each phase puts the other phase's memory to
sleep. Two fresh processes run the same plan with the same seeds: one sleeping, one not; their losses
and generated tokens must be identical.

  python3 bench/sleep/rl_loop.py --out bench/sleep/out            # both processes, then the comparison
  python3 bench/sleep/rl_loop.py --rounds 2 --train-steps 2 --fill 0.5

The model is built from a GPT2Config with random weights (nothing downloaded), sized from the free
device memory F (torch.cuda.mem_get_info) so that weights, gradients and AdamW's states (16 bytes a
parameter, fp32) take about --state-fraction of F (the largest of GPT-2 small, medium, large, XL and
two wider shapes that fits), the KV cache of a rollout about --kv-fraction and a training batch's
activations about --activation-fraction: together most of the device.

Tags (gpumem_torch.region sets the process tag, so autograd's backward thread is covered):
  weights      the model's parameters (never slept)
  optimizer    AdamW's states (created in the first optimizer.step())
  activations  a training step's activations and gradients (freed after each step; its cache stays)
  kv           a rollout's KV cache and activations (freed after the rollout; its cache stays)
  default      the rest: a small warm-up forward and backward first, so that cuBLAS's per-thread
               workspaces are in a tag that is never slept.

Each round (the sleeping process):
  generation phase   sleep(['optimizer', 'activations'], keep=True) (AdamW's states to pinned host
                     memory, the activations' cache released), wake(['kv']); prefill and greedy
                     decoding with past_key_values
  training phase     sleep(['kv'], keep=False) (the KV cache's memory released, content discarded),
                     wake(['optimizer', 'activations']); --train-steps AdamW steps on random tokens
The reference process makes the same calls except sleep and wake. Both report the device's free memory
at each phase (the memory another process, such as an inference engine, could use), the sleep and
wake reports and times, each loss and a hash of each round's tokens.

Deterministic settings: CUBLAS_WORKSPACE_CONFIG=:4096:8, torch.use_deterministic_algorithms(True,
warn_only=True), eager attention, cuDNN benchmark off, greedy decoding, seeded data. Prints a table
and writes OUT/rl_loop.json; exit status 0 when both runs finished and matched, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

from common import REPO, GiB, check_worker_flags, commit, emit_result, free_bytes, markdown_table, run_worker, utc_now, write_json

HERE = os.path.dirname(os.path.abspath(__file__))

VOCAB = 50257
POSITIONS = 1024
# (n_embd, n_layer, n_head): GPT-2 small, medium, large, XL, then wider
SHAPES = [(768, 12, 12), (1024, 24, 16), (1280, 36, 20), (1600, 48, 25), (2048, 48, 32), (2560, 48, 32)]
TRAIN_SEQ = 256
PROMPT_LEN = 32
MAX_GEN_BATCH = 256


def parameters(d, layers):
    """GPT-2's parameter count: per layer 12d^2 + 13d, the token and position embeddings (the head
    is tied to the token embedding), the final layer norm."""
    return layers * (12 * d * d + 13 * d) + VOCAB * d + POSITIONS * d + 2 * d


def make_plan(free, args):
    """The model and batch sizes for a device with `free` bytes free."""
    d, layers, heads = SHAPES[0]
    for shape in SHAPES:
        if 16 * parameters(shape[0], shape[1]) <= args.state_fraction * free:
            d, layers, heads = shape
    params = parameters(d, layers)
    # activations a token (fp32, eager attention): ~40 words of width d a layer, the attention scores
    # (scores, softmax, dropout mask) and the logits with their gradient
    act_per_token = layers * (40 * d + 3 * heads * TRAIN_SEQ) * 4 + 4 * VOCAB * 4
    train_batch = max(1, int(args.activation_fraction * free // (act_per_token * TRAIN_SEQ)))
    kv_per_token = layers * 2 * d * 4
    kv_budget = args.kv_fraction * free
    gen_batch = max(1, min(MAX_GEN_BATCH, int(kv_budget // (kv_per_token * (PROMPT_LEN + 16)))))
    new_tokens = int(kv_budget // (kv_per_token * gen_batch)) - PROMPT_LEN
    new_tokens = max(8, min(args.max_new_tokens, new_tokens, POSITIONS - PROMPT_LEN))
    return {
        "n_embd": d, "n_layer": layers, "n_head": heads, "vocab_size": VOCAB, "n_positions": POSITIONS,
        "parameters": params, "state_bytes": 16 * params,
        "train_batch": train_batch, "train_seq": TRAIN_SEQ, "activation_bytes_estimate": act_per_token * TRAIN_SEQ * train_batch,
        "gen_batch": gen_batch, "prompt_len": PROMPT_LEN, "new_tokens": new_tokens,
        "kv_bytes_estimate": kv_per_token * gen_batch * (PROMPT_LEN + new_tokens),
        "free_bytes_at_plan": free,
    }


# ---------------------------------------------------------------------------------------------
# The worker: one run, sleeping or not.


def greedy_generate(torch, model, prompts, new_tokens, kv_scope, on_cache_full=None):
    """Greedy generation of `new_tokens` per prompt with a KV cache (past_key_values), the cache and
    the step's tensors made inside kv_scope() (a tag or region context); on_cache_full() is called
    while the whole cache is still live. Returns the generated tokens on the CPU."""
    with torch.no_grad(), kv_scope():
        ids = prompts.to("cuda")
        out = model(input_ids=ids, use_cache=True)
        past = out.past_key_values
        token = out.logits[:, -1, :].argmax(-1, keepdim=True)
        tokens = [token]
        del out
        for _ in range(new_tokens - 1):
            out = model(input_ids=token, past_key_values=past, use_cache=True)
            past = out.past_key_values
            token = out.logits[:, -1, :].argmax(-1, keepdim=True)
            tokens.append(token)
            del out
        generated = torch.cat(tokens, dim=1).cpu()
        if on_cache_full is not None:
            on_cache_full()
        del past, tokens, token, ids
    return generated


def train_steps(torch, model, optimizer, data, plan, steps, activations_scope, optimizer_scope):
    """`steps` AdamW steps on random token batches drawn from the generator `data`: the forward and
    backward inside activations_scope(), the optimizer's step inside optimizer_scope(). Returns the losses."""
    losses = []
    for _ in range(steps):
        batch = torch.randint(0, plan["vocab_size"], (plan["train_batch"], plan["train_seq"]), generator=data)
        with activations_scope():
            ids = batch.to("cuda")
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
        losses.append(loss.item())
        with optimizer_scope():
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        del loss, ids
    return losses


def worker(args):
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
    import gpumem_torch as gm

    gm.enable()
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = True  # deterministic, and the same in both runs
    sleeping = args.role == "sleep"
    free0, device_total = torch.cuda.mem_get_info()
    plan = json.loads(args.plan) if args.plan else make_plan(free0, args)
    info = {
        "role": args.role, "plan": plan, "device": torch.cuda.get_device_name(), "device_total_bytes": device_total,
        "free_at_start_bytes": free0, "torch": torch.__version__, "config": gm.config(),
    }
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except Exception:  # noqa: BLE001
        pass
    print(f"{args.role}: GPT-2 {plan['n_embd']}x{plan['n_layer']} ({plan['parameters'] / 1e9:.2f} B parameters), "
          f"train {plan['train_batch']}x{plan['train_seq']}, generate {plan['gen_batch']}x({plan['prompt_len']}+{plan['new_tokens']})",
          flush=True)

    def known(tags):
        names = {t["tag"] for t in gm.tag_stats()}
        return [t for t in tags if t in names]

    def asleep(tags):
        states = {t["tag"]: t["asleep"] for t in gm.tag_stats()}
        return [t for t in tags if states.get(t)]

    def call(what, fn, tags, **kw):
        """sleep or wake `tags` (those known; nothing when none), timed; returns the record."""
        if not sleeping or not tags:
            return None
        torch.cuda.synchronize()
        start = time.perf_counter()
        report = fn(tags, **kw)
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
        print(f"  {what} {tags}: {wall * 1e3:.1f} ms, device {report['device_bytes'] / GiB:.2f} GiB, "
              f"copied {report['copied_bytes'] / GiB:.2f} GiB", flush=True)
        return {"call": what, "tags": tags, "wall_seconds": wall, "report": report}

    torch.manual_seed(0)
    config = GPT2Config(n_embd=plan["n_embd"], n_layer=plan["n_layer"], n_head=plan["n_head"], vocab_size=plan["vocab_size"],
                        n_positions=plan["n_positions"], attn_implementation="eager")
    try:
        config._attn_implementation = "eager"  # where the keyword above is not read
    except AttributeError:
        pass
    with gm.region("weights"), torch.device("cuda"):
        model = GPT2LMHeadModel(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    # warm-up outside any region: cuBLAS's workspaces (the main thread's for forwards, autograd's for
    # backwards) come from the allocator once and stay; here they land in 'default', never slept
    warm = torch.randint(0, plan["vocab_size"], (1, 8), device="cuda")
    model(input_ids=warm, labels=warm).loss.backward()
    model.zero_grad(set_to_none=True)
    del warm
    gm.empty_cache()
    info["free_after_model_bytes"] = free_bytes(torch)

    data = torch.Generator().manual_seed(1)
    rounds = []
    for r in range(args.rounds):
        rec = {"round": r}
        # generation phase
        calls = [call("sleep", gm.sleep, known(["optimizer", "activations"]), keep=True), call("wake", gm.wake, asleep(["kv"]))]
        rec["gen_calls"] = [c for c in calls if c]
        rec["gen_free_bytes"] = free_bytes(torch)
        rec["gen_tags"] = gm.tag_stats()
        prompts = torch.randint(0, plan["vocab_size"], (plan["gen_batch"], plan["prompt_len"]), generator=data)
        model.eval()
        start = time.perf_counter()
        generated = greedy_generate(torch, model, prompts, plan["new_tokens"], lambda: gm.region("kv"),
                                    on_cache_full=lambda: rec.__setitem__("gen_kv_live_free_bytes", free_bytes(torch)))
        rec["gen_seconds"] = time.perf_counter() - start
        model.train()
        rec["tokens_sha256"] = hashlib.sha256(json.dumps(generated.tolist()).encode()).hexdigest()
        rec["tokens_first_row"] = generated[0, :16].tolist()
        # training phase
        calls = [call("sleep", gm.sleep, known(["kv"]), keep=False), call("wake", gm.wake, asleep(["optimizer", "activations"]))]
        rec["train_calls"] = [c for c in calls if c]
        rec["train_free_bytes"] = free_bytes(torch)
        rec["train_tags"] = gm.tag_stats()
        start = time.perf_counter()
        losses = train_steps(torch, model, optimizer, data, plan, args.train_steps, lambda: gm.region("activations"),
                              lambda: gm.region("optimizer"))
        rec["train_after_steps_free_bytes"] = free_bytes(torch)
        rec["train_seconds"] = time.perf_counter() - start
        rec["losses"] = losses
        rounds.append(rec)
        print(f"round {r}: generation free {rec['gen_free_bytes'] / GiB:.2f} GiB (KV live {rec['gen_kv_live_free_bytes'] / GiB:.2f}), "
              f"training free {rec['train_free_bytes'] / GiB:.2f} GiB (after steps {rec['train_after_steps_free_bytes'] / GiB:.2f}), "
              f"losses {', '.join(f'{x:.6f}' for x in losses)}, tokens {rec['tokens_sha256'][:12]}", flush=True)
    if sleeping and asleep(["kv", "optimizer", "activations"]):
        gm.wake(asleep(["kv", "optimizer", "activations"]))
    info["rounds"] = rounds
    info["memory_stats"] = {k: v for k, v in gm.memory_stats().items() if k.startswith(("reserved_bytes.all", "allocated_bytes.all"))}
    emit_result(info)
    return 0


# ---------------------------------------------------------------------------------------------
# The parent: the sleeping run (which makes the plan), then the reference run with its plan.


def run_role(role, args, plan, limit):
    worker_args = ["--role", role, "--rounds", str(args.rounds), "--train-steps", str(args.train_steps),
                   "--state-fraction", str(args.state_fraction), "--kv-fraction", str(args.kv_fraction),
                   "--activation-fraction", str(args.activation_fraction), "--max-new-tokens", str(args.max_new_tokens)]
    if plan:
        worker_args += ["--plan", json.dumps(plan)]
    print(f"== {role}", flush=True)
    run = run_worker(__file__, worker_args, limit)
    if run.timed_out:
        print(run.stdout, flush=True)
        return {"role": role, "status": "timed out", "reason": f"no result within {limit:.0f} s"}
    if run.returncode != 0 or not run.results:
        print(run.stderr[-4000:], flush=True)
        return {"role": role, "status": "failed", "exit": run.returncode, "reason": run.reason}
    result = run.results[-1]
    result["status"] = "ok"
    return result


def compare(a, b):
    """Whether two runs' losses and tokens are identical, round by round; returns (match, differences)."""
    diffs = []
    for ra, rb in zip(a["rounds"], b["rounds"]):
        if ra["losses"] != rb["losses"]:
            diffs.append(f"round {ra['round']}: losses {ra['losses']} against {rb['losses']}")
        if ra["tokens_sha256"] != rb["tokens_sha256"]:
            diffs.append(f"round {ra['round']}: tokens differ (first row {ra['tokens_first_row']} against {rb['tokens_first_row']})")
    if len(a["rounds"]) != len(b["rounds"]):
        diffs.append(f"{len(a['rounds'])} rounds against {len(b['rounds'])}")
    return not diffs, diffs


def gib(n):
    return f"{n / GiB:.2f}"


def table(sleep, ref):
    head = ("round", "phase", "free GiB, sleeping", "free GiB, reference", "sleep/wake ms (device GiB, copied GiB)")
    rows = []
    for rs, rr in zip(sleep["rounds"], ref["rounds"]):
        def fmt(cs):
            return "; ".join(f"{c['call']} {'+'.join(c['tags'])} {c['wall_seconds'] * 1e3:.0f} "
                             f"({c['report']['device_bytes'] / GiB:.1f}, {c['report']['copied_bytes'] / GiB:.1f})" for c in cs) or "–"

        rows.append((str(rs["round"]), "generation", f"{gib(rs['gen_free_bytes'])} (KV live {gib(rs['gen_kv_live_free_bytes'])})",
                     f"{gib(rr['gen_free_bytes'])} (KV live {gib(rr['gen_kv_live_free_bytes'])})", fmt(rs["gen_calls"])))
        rows.append((str(rs["round"]), "training", f"{gib(rs['train_free_bytes'])} (after {gib(rs['train_after_steps_free_bytes'])})",
                     f"{gib(rr['train_free_bytes'])} (after {gib(rr['train_after_steps_free_bytes'])})", fmt(rs["train_calls"])))
    return markdown_table(head, rows)


def parent(args):
    start = time.perf_counter()
    sleep = run_role("sleep", args, None, args.timeout)
    ref = run_role("reference", args, sleep.get("plan"), args.timeout) if sleep["status"] == "ok" else {
        "role": "reference", "status": "not run", "reason": "the sleeping run failed (it makes the plan)"}
    doc = {"benchmark": "sleep-rl-loop", "date": utc_now(), "commit": commit(), "rounds": args.rounds, "train_steps": args.train_steps, "sleep": sleep, "reference": ref}
    ok = sleep["status"] == "ok" and ref["status"] == "ok"
    if ok:
        match, diffs = compare(sleep, ref)
        doc["identical"] = match
        doc["differences"] = diffs
        p = sleep["plan"]
        print(f"\n{sleep['device']}, torch {sleep['torch']}, transformers {sleep.get('transformers', '?')}: GPT-2 "
              f"{p['n_embd']}x{p['n_layer']} ({p['parameters'] / 1e9:.2f} B parameters, {p['state_bytes'] / GiB:.1f} GiB of "
              f"weights, gradients and AdamW states), training batch {p['train_batch']}x{p['train_seq']}, rollouts "
              f"{p['gen_batch']}x({p['prompt_len']}+{p['new_tokens']}) (KV ~{p['kv_bytes_estimate'] / GiB:.1f} GiB)")
        print(table(sleep, ref))
        print("losses and tokens: " + ("identical in every round" if match else "DIFFER:\n  " + "\n  ".join(diffs)))
        ok = match
    else:
        for r in (sleep, ref):
            if r["status"] != "ok":
                print(f"{r['role']}: {r['status']}: {r.get('reason', '')}")
    doc["seconds"] = round(time.perf_counter() - start, 1)
    path = write_json(doc, args, "rl_loop.json")
    print(f"JSON: {path}")
    return 0 if ok else 1


def fraction(text):
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1 but received {text}")
    return value


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer but received {text}")
    return value


def main(argv=None):
    p = argparse.ArgumentParser(description="An RL-style loop (rollouts, then AdamW steps) that sleeps each phase's "
                                "idle memory under gpumem_torch, against the same run without sleeping.")
    p.add_argument("--out", default=os.path.join(HERE, "out"), help="folder of rl_loop.json (default bench/sleep/out)")
    p.add_argument("--json", help="where to write the JSON (default OUT/rl_loop.json)")
    p.add_argument("--rounds", type=positive, default=3, help="generation+training rounds (default 3)")
    p.add_argument("--train-steps", type=positive, default=3, help="AdamW steps a round (default 3)")
    p.add_argument("--state-fraction", type=fraction, default=0.35,
                   help="share of free device memory for weights, gradients and AdamW states (default 0.35)")
    p.add_argument("--kv-fraction", type=fraction, default=0.3, help="share for a rollout's KV cache (default 0.3)")
    p.add_argument("--activation-fraction", type=fraction, default=0.15,
                   help="share for a training step's activations (default 0.15)")
    p.add_argument("--max-new-tokens", type=positive, default=256, help="tokens generated a rollout, at most (default 256)")
    p.add_argument("--timeout", type=float, default=240, help="seconds per process (default 240)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--role", choices=("sleep", "reference"), help=argparse.SUPPRESS)
    p.add_argument("--plan", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        check_worker_flags(p, args, "role")
        return worker(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
