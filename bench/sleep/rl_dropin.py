#!/usr/bin/env python3
"""rl_loop.py's RL step (rollouts with a KV cache, then AdamW steps, on one GPT-2 style model) written the
way a framework writes it against each drop-in shape, run once per implementation in a fresh process:

  saver        the torch_memory_saver-shaped code, importing gpumem_torch.saver
  peer         the same code, importing torch_memory_saver itself (hook_mode="torch": no LD_PRELOAD)
  tagged_pool  the vLLM CuMemAllocator-shaped code, importing gpumem_torch.tagged_pool (vLLM itself is
               not installable on the GPU hosts)

Only the import differs between saver and peer (import_saver below). Every run uses the same plan
and seeds; generated tokens and losses must be identical across them, and in every phase gpumem's
saver must free at least as much device memory as the peer running the same code.

  python3 bench/sleep/rl_dropin.py --peer-site bench/sleep/out/peer/site     # the peer from build_peer.sh
  python3 bench/sleep/rl_dropin.py --impls saver,tagged_pool --rounds 2

What each phase does (the tags: weights, optimizer (AdamW's states), activations (a training step's),
kv_cache (a rollout's KV cache and activations)):

  saver/peer   generation: pause("optimizer"), pause("activations"), resume("kv_cache");
               training:   pause("kv_cache"), resume("optimizer"), resume("activations").
               weights and optimizer are regions with enable_cpu_backup=True, the others without.
  tagged_pool  generation: sleep(offload_tags=("weights", "optimizer")), wake_up(["weights", "kv_cache"]);
               training:   sleep(offload_tags=("weights", "optimizer")), wake_up(["weights", "optimizer",
               "activations"]). vLLM's sleep puts the whole pool to sleep, so the weights make the round trip.

"free" is the device's free memory (torch.cuda.mem_get_info) once a phase's calls are made, "freed" that
less the free memory before them. Prints a table and writes OUT/rl_dropin.json; exit status 0 when every
run finished (a run that reported every round and then failed on its way out counts, its exit recorded),
the tokens and losses match and gpumem left at least as much free as the peer in every phase.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import REPO, GiB, check_worker_flags, commit, csv_list, emit_result, free_bytes, markdown_table, run_worker, utc_now, write_json  # noqa: E402
from rl_loop import fraction, greedy_generate, make_plan, positive, train_steps  # noqa: E402

IMPLS = ("saver", "tagged_pool", "peer")
GPUMEM_IMPLS = ("saver", "tagged_pool")


def import_saver(impl):
    """The one line a framework changes."""
    if impl == "peer":
        from torch_memory_saver import torch_memory_saver
    else:
        from gpumem_torch.saver import memory_saver as torch_memory_saver
    return torch_memory_saver


def import_pool():
    from gpumem_torch.tagged_pool import TaggedPool as CuMemAllocator

    return CuMemAllocator


# ---------------------------------------------------------------------------------------------
# The framework's side: the same for every implementation of a shape.


class SaverShape:
    """Phases written against torch_memory_saver's API."""

    def __init__(self, torch_memory_saver):
        self.saver = torch_memory_saver
        self.saver.hook_mode = "torch"  # first thing, before CUDA

    def weights(self):
        return self.saver.region(tag="weights", enable_cpu_backup=True)

    def optimizer(self):
        return self.saver.region(tag="optimizer", enable_cpu_backup=True)

    def activations(self):
        return self.saver.region(tag="activations")

    def kv_cache(self):
        return self.saver.region(tag="kv_cache")

    def to_generation(self):
        self.saver.pause("optimizer")
        self.saver.pause("activations")
        self.saver.resume("kv_cache")

    def to_training(self):
        self.saver.pause("kv_cache")
        self.saver.resume("optimizer")
        self.saver.resume("activations")


class PoolShape:
    """Phases written against vLLM's CuMemAllocator API."""

    def __init__(self, CuMemAllocator):  # noqa: N803  (the class, under the name frameworks give it)
        self.allocator = CuMemAllocator.get_instance()  # first thing, before CUDA

    def weights(self):
        return self.allocator.use_memory_pool(tag="weights")

    def optimizer(self):
        return self.allocator.use_memory_pool(tag="optimizer")

    def activations(self):
        return self.allocator.use_memory_pool(tag="activations")

    def kv_cache(self):
        return self.allocator.use_memory_pool(tag="kv_cache")

    def to_generation(self):
        self.allocator.sleep(offload_tags=("weights", "optimizer"))
        self.allocator.wake_up(["weights", "kv_cache"])

    def to_training(self):
        self.allocator.sleep(offload_tags=("weights", "optimizer"))
        self.allocator.wake_up(["weights", "optimizer", "activations"])


# ---------------------------------------------------------------------------------------------
# The worker: one implementation.


def worker(args):
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
    if args.peer_site:
        sys.path.insert(0, os.path.abspath(args.peer_site))
    shape = PoolShape(import_pool()) if args.impl == "tagged_pool" else SaverShape(import_saver(args.impl))
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = True
    free0, device_total = torch.cuda.mem_get_info()
    plan = json.loads(args.plan) if args.plan else make_plan(free0, args)
    info = {"impl": args.impl, "plan": plan, "device": torch.cuda.get_device_name(), "device_total_bytes": device_total,
            "free_at_start_bytes": free0, "torch": torch.__version__}
    print(f"{args.impl}: GPT-2 {plan['n_embd']}x{plan['n_layer']}, train {plan['train_batch']}x{plan['train_seq']}, "
          f"generate {plan['gen_batch']}x({plan['prompt_len']}+{plan['new_tokens']})", flush=True)

    torch.manual_seed(0)
    config = GPT2Config(n_embd=plan["n_embd"], n_layer=plan["n_layer"], n_head=plan["n_head"], vocab_size=plan["vocab_size"],
                        n_positions=plan["n_positions"], attn_implementation="eager")
    try:
        config._attn_implementation = "eager"
    except AttributeError:
        pass
    with shape.weights(), torch.device("cuda"):
        model = GPT2LMHeadModel(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    warm = torch.randint(0, plan["vocab_size"], (1, 8), device="cuda")
    model(input_ids=warm, labels=warm).loss.backward()  # cuBLAS's workspaces, outside every tag
    model.zero_grad(set_to_none=True)
    del warm

    def phase(transition):
        before = free_bytes(torch)
        start = time.perf_counter()
        transition()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        after = free_bytes(torch)
        return {"free_before_bytes": before, "free_after_bytes": after, "freed_bytes": after - before, "seconds": seconds}

    data = torch.Generator().manual_seed(1)
    rounds = []
    for r in range(args.rounds):
        rec = {"round": r, "generation": phase(shape.to_generation)}
        prompts = torch.randint(0, plan["vocab_size"], (plan["gen_batch"], plan["prompt_len"]), generator=data)
        model.eval()
        generated = greedy_generate(torch, model, prompts, plan["new_tokens"], shape.kv_cache)
        model.train()
        rec["tokens_sha256"] = hashlib.sha256(json.dumps(generated.tolist()).encode()).hexdigest()
        rec["training"] = phase(shape.to_training)
        losses = train_steps(torch, model, optimizer, data, plan, args.train_steps, shape.activations, shape.optimizer)
        rec["losses"] = losses
        rounds.append(rec)
        print(f"round {r}: generation freed {rec['generation']['freed_bytes'] / GiB:.2f} GiB, training freed "
              f"{rec['training']['freed_bytes'] / GiB:.2f} GiB, losses {', '.join(f'{x:.6f}' for x in losses)}, "
              f"tokens {rec['tokens_sha256'][:12]}", flush=True)
    info["rounds"] = rounds
    emit_result(info)
    return 0


# ---------------------------------------------------------------------------------------------
# The parent


def run_impl(impl, args, plan):
    worker_args = ["--impl", impl, "--rounds", str(args.rounds), "--train-steps", str(args.train_steps),
                   "--state-fraction", str(args.state_fraction), "--kv-fraction", str(args.kv_fraction),
                   "--activation-fraction", str(args.activation_fraction), "--max-new-tokens", str(args.max_new_tokens)]
    if plan:
        worker_args += ["--plan", json.dumps(plan)]
    if args.peer_site:
        worker_args += ["--peer-site", args.peer_site]
    print(f"== {impl}", flush=True)
    run = run_worker(__file__, worker_args, args.timeout)
    if run.timed_out:
        return {"impl": impl, "status": "timed out", "reason": f"no result within {args.timeout:.0f} s"}
    if not run.results:
        print(run.stderr[-4000:], flush=True)
        return {"impl": impl, "status": "failed", "exit": run.returncode, "reason": run.reason}
    result = run.results[-1]
    result["status"] = "ok"
    if run.returncode != 0:
        # Every round done and reported, then the process failed on its way out (the peer's teardown
        # frees memory outside its regions): the rounds stand, the exit is recorded.
        print(f"{impl}: exit {run.returncode} after its result: {run.reason}", flush=True)
        result.update({"exit_after_result": run.returncode, "reason": run.reason})
    return result


def differences(runs):
    """Where the runs' tokens or losses differ from the first run's, round by round."""
    diffs = []
    first = runs[0]
    for other in runs[1:]:
        for ra, rb in zip(first["rounds"], other["rounds"]):
            if ra["losses"] != rb["losses"]:
                diffs.append(f"round {ra['round']}: losses {first['impl']} {ra['losses']}, {other['impl']} {rb['losses']}")
            if ra["tokens_sha256"] != rb["tokens_sha256"]:
                diffs.append(f"round {ra['round']}: tokens of {first['impl']} and {other['impl']} differ")
    return diffs


def short_freed(runs):
    """Phases where a gpumem shape left less device memory free than the peer did, once the phase's
    calls were made (16 MiB of slack for the allocators' rounding): what each phase has to work with.
    (What the calls freed depends on what the phase before held, which differs between the shapes.)"""
    peer = next((r for r in runs if r["impl"] == "peer"), None)
    if peer is None:
        return []
    out = []
    for run in runs:
        if run["impl"] not in GPUMEM_IMPLS:
            continue
        for ra, rp in zip(run["rounds"], peer["rounds"]):
            for ph in ("generation", "training"):
                if ra[ph]["free_after_bytes"] + (16 << 20) < rp[ph]["free_after_bytes"]:
                    out.append(f"round {ra['round']} {ph}: {run['impl']} left {ra[ph]['free_after_bytes'] / GiB:.2f} GiB "
                               f"free, the peer {rp[ph]['free_after_bytes'] / GiB:.2f} GiB")
    return out


def table(runs):
    head = ("round", "phase") + tuple(f"free GiB (freed by the calls), {r['impl']}" for r in runs) + ("losses",)
    rows = []
    for i, rec in enumerate(runs[0]["rounds"]):
        for ph in ("generation", "training"):
            cells = tuple(f"{r['rounds'][i][ph]['free_after_bytes'] / GiB:.2f} ({r['rounds'][i][ph]['freed_bytes'] / GiB:+.2f} "
                          f"in {r['rounds'][i][ph]['seconds'] * 1e3:.0f} ms)" for r in runs)
            losses = ", ".join(f"{x:.6f}" for x in rec["losses"]) if ph == "training" else ""
            rows.append((str(rec["round"]), ph) + cells + (losses,))
    return markdown_table(head, rows)


def parent(args):
    start = time.perf_counter()
    results, plan = [], None
    for impl in args.impls:
        result = run_impl(impl, args, plan)
        results.append(result)
        if result["status"] == "ok" and plan is None:
            plan = result["plan"]
    ok_runs = [r for r in results if r["status"] == "ok"]
    doc = {"benchmark": "sleep-rl-dropin", "date": utc_now(), "commit": commit(), "rounds": args.rounds,
           "train_steps": args.train_steps, "runs": results}
    ok = len(ok_runs) == len(results)
    for r in results:
        if r["status"] != "ok":
            print(f"{r['impl']}: {r['status']}: {r.get('reason', '')}")
    if ok_runs:
        diffs = differences(ok_runs)
        short = short_freed(ok_runs)
        doc.update({"identical": not diffs, "differences": diffs, "gpumem_freed_less": short})
        p = ok_runs[0]["plan"]
        print(f"\n{ok_runs[0]['device']}, torch {ok_runs[0]['torch']}: GPT-2 {p['n_embd']}x{p['n_layer']} "
              f"({p['parameters'] / 1e9:.2f} B parameters)")
        print(table(ok_runs))
        print("tokens and losses: " + ("identical in every run" if not diffs else "DIFFER:\n  " + "\n  ".join(diffs)))
        if any(r["impl"] == "peer" for r in ok_runs):
            print("device memory free in each phase: " + ("gpumem at least as much as the peer in every phase" if not short
                                                          else "gpumem LESS:\n  " + "\n  ".join(short)))
        ok = ok and not diffs and not short
    doc["seconds"] = round(time.perf_counter() - start, 1)
    print(f"JSON: {write_json(doc, args, 'rl_dropin.json')}")
    return 0 if ok else 1


def main(argv=None):
    p = argparse.ArgumentParser(description="rl_loop's RL step written against each drop-in shape, per implementation.")
    p.add_argument("--out", default=os.path.join(HERE, "out"), help="folder of rl_dropin.json (default bench/sleep/out)")
    p.add_argument("--json", help="where to write the JSON (default OUT/rl_dropin.json)")
    p.add_argument("--impls", type=csv_list(IMPLS, "implementations"), help=f"comma-separated, of {', '.join(IMPLS)} "
                   "(default: all; peer only with --peer-site)")
    p.add_argument("--peer-site", help="folder holding the torch_memory_saver package (build_peer.sh's out/peer/site)")
    p.add_argument("--rounds", type=positive, default=2, help="generation+training rounds (default 2)")
    p.add_argument("--train-steps", type=positive, default=2, help="AdamW steps a round (default 2)")
    p.add_argument("--state-fraction", type=fraction, default=0.2, help="share of free memory for weights, gradients and AdamW (default 0.2)")
    p.add_argument("--kv-fraction", type=fraction, default=0.2, help="share for a rollout's KV cache (default 0.2)")
    p.add_argument("--activation-fraction", type=fraction, default=0.1, help="share for a step's activations (default 0.1)")
    p.add_argument("--max-new-tokens", type=positive, default=64, help="tokens generated a rollout, at most (default 64)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per process (default 300)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--impl", choices=IMPLS, help=argparse.SUPPRESS)
    p.add_argument("--plan", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        check_worker_flags(p, args, "impl")
        return worker(args)
    if args.impls is None:
        args.impls = list(IMPLS) if args.peer_site else list(GPUMEM_IMPLS)
    if "peer" in args.impls and not args.peer_site:
        p.error("the peer needs --peer-site (bash bench/sleep/build_peer.sh SOURCE 4a43c97 makes bench/sleep/out/peer/site)")
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
