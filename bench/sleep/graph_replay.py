#!/usr/bin/env python3
"""A CUDA graph captured before sleep replays after wake with bit-identical outputs: a real model
(GPT-2 small from its configuration, or torchvision's resnet18; random weights, nothing downloaded)
captured once with a static input, its memory put to sleep and woken, the graph replayed, its output
compared byte for byte with the replay before the sleep. One fresh process per (model, path).

  python3 bench/sleep/graph_replay.py --out bench/sleep/out              # resnet18 and gpt2, the mempool path
  python3 bench/sleep/graph_replay.py --models gpt2 --paths mempool,enable

Paths (how the graph's memory comes from gpumem):
  mempool   PyTorch's caching allocator keeps the graph's private pool: gpumem_torch.allocator('expandable')
            gives one torch.cuda.MemPool per tag ('weights': parameters and the static input;
            'graph': what the capture allocates), and torch.cuda.graph(g, pool=<the 'graph' pool's
            id>) captures into it. The graph's intermediates stay allocated to the pool (PyTorch
            holds them for the graph's replays), so gpumem sees them as live blocks. Sleep and wake
            are the allocator object's (alloc.sleep, alloc.wake).
  enable    gpumem_torch.enable() for the whole process, gpumem_torch.region('weights') and
            region('graph') around the model and the capture. PyTorch has no private pool for a
            pluggable allocator: what the capture frees (the graph's intermediates) goes back to
            gpumem while the graph still writes it at every replay. Without sleep that holds only
            while nothing else is allocated on the capture's stream in the 'graph' tag (gpumem hands
            a freed block out again on the same stream and tag only), which this script keeps to.
            With sleep it may fail: expandable's sleep unmaps a tag's idle runs (mapped granules no
            live block touches) for good, and wake maps again only the runs under live blocks, so
            intermediates that sit in runs of their own are unmapped when the graph replays. A small
            model's intermediates may all share runs with live blocks; GPT-2's are larger. The
            mempool path does not depend on that, and is the default; under enable() keep the
            graph's own memory in a tag that stays awake (docs/torch.md).

Each path captures after three warm-up forwards on the capture's stream (where a capture is refused
in torch.cuda.graph's default error mode, 'global', one more process tries 'relaxed'), replays twice
(the two outputs must agree), then:
  keep      sleep every tag keeping content; wake; replay
  discard   sleep 'weights' (keep) and 'graph' (discard: intermediates and the output are rewritten
            by every replay); wake; replay
and compares each replay's output with the first, byte for byte, and reports the device's free
memory awake and asleep and the sleep and wake reports. Also records (not a condition) whether an
eager forward gives the same bytes as the graph.

Prints a table and writes OUT/graph_replay.json. Exit status: 0 when every (model, path) matched,
else the number that did not (or failed).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

from common import REPO, GiB, check_worker_flags, commit, csv_list, emit_result, free_bytes, markdown_table, run_worker, utc_now, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("gpt2", "resnet18")
PATHS = ("mempool", "enable")


def build(torch, name):
    """(model in eval mode, static input, forward) on the current device."""
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        # GPT-2 small: 12 layers, 768 wide. SDPA's causal path builds no mask tensor; the eager mask
        # copies a host scalar to the device, which capture refuses.
        config = GPT2Config(attn_implementation="sdpa")
        try:
            config._attn_implementation = "sdpa"
        except AttributeError:
            pass
        model = GPT2LMHeadModel(config).to("cuda").eval()
        g = torch.Generator().manual_seed(7)
        static = torch.randint(0, config.vocab_size, (4, 128), generator=g).to("cuda")
        return model, static, lambda x: model(input_ids=x, use_cache=False).logits
    import torchvision

    model = torchvision.models.resnet18().to("cuda").eval()
    g = torch.Generator().manual_seed(7)
    static = torch.randn(16, 3, 224, 224, generator=g).to("cuda")
    return model, static, model


def worker(args):
    sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
    import gpumem_torch as gm

    if args.path == "enable":
        gm.enable()
    import torch

    torch.backends.cudnn.benchmark = False
    result = {"model": args.model, "path": args.path, "torch": torch.__version__, "device": torch.cuda.get_device_name()}
    if args.path == "mempool":
        alloc = gm.allocator("expandable")
        pools = {tag: alloc.mem_pool() for tag in ("weights", "graph")}
        api = alloc

        def tagged(tag):
            stack = contextlib.ExitStack()
            stack.enter_context(gm.region(tag))
            stack.enter_context(torch.cuda.use_mem_pool(pools[tag]))
            return stack

        graph_kwargs = {"pool": pools["graph"].id}
    else:
        api = gm

        def tagged(tag):
            return gm.region(tag)

        graph_kwargs = {}

    torch.manual_seed(0)
    with tagged("weights"):
        model, static, forward = build(torch, args.model)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.no_grad():
        with torch.cuda.stream(stream), tagged("graph"):
            for _ in range(3):
                forward(static)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        start = time.perf_counter()
        # the tag only: torch.cuda.graph routes the capture's allocations to the pool itself
        with gm.region("graph"):
            with torch.cuda.graph(graph, stream=stream, capture_error_mode=args.capture_error_mode, **graph_kwargs):
                out = forward(static)
        result["capture_seconds"] = time.perf_counter() - start
        graph.replay()
        torch.cuda.synchronize()
        reference = out.cpu()
        graph.replay()
        torch.cuda.synchronize()
        result["replays_agree"] = bool(torch.equal(out.cpu(), reference))
        result["eager_equal"] = bool(torch.equal(forward(static).cpu(), reference))
    result["output_shape"] = list(out.shape)
    result["output_pointer_before"] = out.data_ptr()
    result["tags_awake"] = api.tag_stats()

    scenarios = {"keep": {"tags": None, "keep": True}, "discard": {"tags": ["weights", "graph"], "keep": ["weights"]}}
    result["scenarios"] = {}
    for name, request in scenarios.items():
        rec = {"request": request, "free_awake_bytes": free_bytes(torch)}
        torch.cuda.synchronize()
        start = time.perf_counter()
        rec["sleep_report"] = api.sleep(request["tags"], keep=request["keep"])
        rec["sleep_seconds"] = time.perf_counter() - start
        rec["free_asleep_bytes"] = free_bytes(torch)
        rec["tags_asleep"] = api.tag_stats()
        start = time.perf_counter()
        rec["wake_report"] = api.wake(request["tags"])
        torch.cuda.synchronize()
        rec["wake_seconds"] = time.perf_counter() - start
        rec["free_woken_bytes"] = free_bytes(torch)
        graph.replay()
        torch.cuda.synchronize()
        rec["output_equal"] = bool(torch.equal(out.cpu(), reference))
        result["scenarios"][name] = rec
        print(f"{name}: sleep {rec['sleep_seconds'] * 1e3:.1f} ms, free {rec['free_awake_bytes'] / GiB:.2f} -> "
              f"{rec['free_asleep_bytes'] / GiB:.2f} GiB, wake {rec['wake_seconds'] * 1e3:.1f} ms, replay after wake "
              f"{'bit-identical' if rec['output_equal'] else 'DIFFERS'}", flush=True)
    result["output_pointer_after"] = out.data_ptr()
    result["identical"] = result["replays_agree"] and all(s["output_equal"] for s in result["scenarios"].values())
    emit_result(result)
    return 0 if result["identical"] else 1


def run_one(model, path, args, mode):
    print(f"== {model} {path} (capture_error_mode {mode})", flush=True)
    run = run_worker(__file__, ["--model", model, "--path", path, "--capture-error-mode", mode], args.timeout)
    if run.timed_out:
        return {"model": model, "path": path, "status": "timed out", "reason": f"no result within {args.timeout:.0f} s"}
    if not run.results:
        print(run.stderr[-4000:], flush=True)
        return {"model": model, "path": path, "status": "failed", "exit": run.returncode, "capture_error_mode": mode,
                "reason": run.reason, "capture_refused": "captur" in run.stderr}
    result = run.results[-1]
    result["status"] = "ok" if result["identical"] else "differs"
    result["capture_error_mode"] = mode
    return result


def run_with_retry(model, path, args):
    """One process; where the capture itself was refused (an API call CUDA forbids while a stream
    captures, in the global or thread-local mode), one more with capture_error_mode 'relaxed'."""
    result = run_one(model, path, args, args.capture_error_mode)
    if result.get("capture_refused") and args.capture_error_mode != "relaxed":
        print(f"  the capture was refused in mode {args.capture_error_mode}; again with 'relaxed'", flush=True)
        retry = run_one(model, path, args, "relaxed")
        retry["first_attempt"] = result
        return retry
    return result


def table(results):
    head = ("model", "path", "result", "keep: free awake→asleep GiB, sleep/wake ms", "discard: free awake→asleep GiB, sleep/wake ms", "eager = graph")
    rows = []
    for r in results:
        if r["status"] in ("failed", "timed out"):
            rows.append((r["model"], r["path"], r["status"], r.get("reason", "")[:100], "", ""))
            continue
        cells = []
        for name in ("keep", "discard"):
            s = r["scenarios"][name]
            cells.append(f"{s['free_awake_bytes'] / GiB:.2f}→{s['free_asleep_bytes'] / GiB:.2f}, "
                         f"{s['sleep_seconds'] * 1e3:.1f}/{s['wake_seconds'] * 1e3:.1f}"
                         + ("" if s["output_equal"] else " DIFFERS"))
        path = r["path"] + ("" if r["capture_error_mode"] == "global" else f" ({r['capture_error_mode']})")
        rows.append((r["model"], path, "bit-identical" if r["identical"] else "DIFFERS", *cells, str(r["eager_equal"]).lower()))
    return markdown_table(head, rows)


def parent(args):
    start = time.perf_counter()
    results = [run_with_retry(m, p, args) for m in args.models for p in args.paths]
    doc = {"benchmark": "sleep-graph-replay", "date": utc_now(), "commit": commit(),
           "capture_error_mode": args.capture_error_mode, "results": results,
           "seconds": round(time.perf_counter() - start, 1)}
    path = write_json(doc, args, "graph_replay.json")
    first = next((r for r in results if r.get("device")), {})
    print(f"\nCUDA graph replay after sleep and wake, {first.get('device', 'no device')}, torch {first.get('torch', '?')}")
    print(table(results))
    bad = sum(1 for r in results if r["status"] != "ok")
    print(f"{len(results) - bad} of {len(results)} bit-identical; JSON: {path}")
    return min(bad, 100)


def main(argv=None):
    p = argparse.ArgumentParser(description="A CUDA graph captured before sleep replays after wake with bit-identical outputs.")
    p.add_argument("--out", default=os.path.join(HERE, "out"), help="folder of graph_replay.json (default bench/sleep/out)")
    p.add_argument("--json", help="where to write the JSON (default OUT/graph_replay.json)")
    p.add_argument("--models", type=csv_list(MODELS, "model"), default=["resnet18", "gpt2"], help="gpt2, resnet18 (comma-separated; default both)")
    p.add_argument("--paths", type=csv_list(PATHS, "path"), default=["mempool"], help="mempool, enable (comma-separated; default mempool)")
    p.add_argument("--capture-error-mode", choices=("global", "thread_local", "relaxed"), default="global",
                   help="torch.cuda.graph's capture_error_mode (default global; a capture refused in it is tried again with relaxed)")
    p.add_argument("--timeout", type=float, default=120, help="seconds per process (default 120)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", choices=MODELS, help=argparse.SUPPRESS)
    p.add_argument("--path", choices=PATHS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        check_worker_flags(p, args, "model", "path")
        return worker(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
