"""One PyTorch process for test_sleep.py's GPU cases: sleep and wake by tag with gpumem's
'expandable' strategy. Prints one line ``GPUMEM_WORKER_RESULT {json}``.

Modes:
  keep      enable(); tensors in two regions; sleep one keeping its content: the device's free memory
            rises by about its bytes, an allocation in it fails, the other tag is untouched; wake:
            content bit-identical, data_ptr unchanged; every tag asleep: nothing reserved
  discard   the same with keep=False: nothing copied, the tensor usable again after wake
  wake_oom  a tag asleep, the device filled by another tag: wake raises OutOfMemoryError (also
            torch.OutOfMemoryError) and the tag stays asleep; room made, wake restores the content
  mempool   an allocator object behind a torch.cuda.MemPool: its segments sleep with their tag
  graph     enable(); a small model's CUDA graph captured before its weights sleep replays after
            wake with the same output (the graph's own memory in a tag that stays awake)
"""

import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bindings/python

import gpumem_torch  # noqa: E402

MiB = 1 << 20


def emit(result):
    sys.stdout.write("GPUMEM_WORKER_RESULT " + json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return [type(e).__name__, str(e)]
    return None


def free_bytes(torch):
    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0]


def random_bytes(torch, n):
    return torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")


def weights_and_kv(torch, n):
    """n bytes of random floats in tag 'weights' and n random bytes in 'kv'."""
    with gpumem_torch.region("weights"):
        w = torch.randn(n // 4, device="cuda")
    with gpumem_torch.region("kv"):
        kv = random_bytes(torch, n)
    return w, kv


def sleep_measured(torch, sleep):
    """(sleep()'s report, the device's free memory before, after)."""
    before = free_bytes(torch)
    report = sleep()
    return report, before, free_bytes(torch)


def run_enabled(result, keep):
    gpumem_torch.enable()
    import torch

    n = 256 * MiB
    w, kv = weights_and_kv(torch, n)
    w_expected, kv_expected, ptr = w.cpu(), kv.cpu(), kv.data_ptr()
    report, before, asleep = sleep_measured(torch, lambda: gpumem_torch.sleep("kv", keep=keep))

    def allocate_in_kv():
        with gpumem_torch.region("kv"):
            torch.empty(MiB, dtype=torch.uint8, device="cuda")

    result.update(
        report=report,
        tag_bytes=n,
        freed=asleep - before,
        alloc_while_asleep=error_of(allocate_in_kv),
        weights_untouched=bool(torch.equal(w.cpu(), w_expected)),
        stats=gpumem_torch.tag_stats(),
    )
    result["wake"] = gpumem_torch.wake("kv")
    result["returned"] = asleep - free_bytes(torch)
    result["same_ptr"] = kv.data_ptr() == ptr
    if keep:
        result["same_content"] = bool(torch.equal(kv.cpu(), kv_expected))
    else:
        kv.fill_(3)
        result["usable"] = bool((kv == 3).all().item())
    gpumem_torch.sleep()  # every tag: gpumem holds no device memory
    result["reserved_all_asleep"] = gpumem_torch.memory_reserved()
    gpumem_torch.wake()
    result["weights_after_all"] = bool(torch.equal(w.cpu(), w_expected))


def run_wake_oom(result):
    gpumem_torch.enable()
    import torch

    n = 1024 * MiB
    with gpumem_torch.region("kv"):
        kv = random_bytes(torch, n)
    expected = kv.cpu()
    gpumem_torch.sleep("kv")
    filler = None
    with gpumem_torch.region("filler"):
        room = free_bytes(torch) - 256 * MiB  # less than the tag needs back
        while filler is None and room > n:
            try:
                filler = torch.empty(room, dtype=torch.uint8, device="cuda")
            except RuntimeError:
                room -= 256 * MiB
    result["filled"] = filler is not None
    try:
        gpumem_torch.wake("kv")
        result["error"] = None
    except Exception as e:  # noqa: BLE001
        result["error"] = [type(e).__name__, str(e)]
        result["is_torch_oom"] = isinstance(e, torch.OutOfMemoryError)
        result["is_gpumem_oom"] = isinstance(e, gpumem_torch.OutOfMemoryError)
    result["still_asleep"] = {s["tag"]: s["asleep"] for s in gpumem_torch.tag_stats()}["kv"]
    del filler
    gpumem_torch.empty_cache()  # the filler's granules go back to the driver
    result["wake"] = gpumem_torch.wake("kv")
    result["same_content"] = bool(torch.equal(kv.cpu(), expected))


def run_mempool(result):
    import torch

    alloc = gpumem_torch.allocator("expandable")
    pool = alloc.mem_pool()
    n = 256 * MiB
    with torch.cuda.use_mem_pool(pool):
        w, kv = weights_and_kv(torch, n)
    w_expected, kv_expected, ptr = w.cpu(), kv.cpu(), kv.data_ptr()
    report, before, asleep = sleep_measured(torch, lambda: alloc.sleep("kv"))

    def allocate_in_kv():  # larger than any free block of the pool: a new segment, in a sleeping tag
        with torch.cuda.use_mem_pool(pool), gpumem_torch.region("kv"):
            torch.empty(2 * n, dtype=torch.uint8, device="cuda")

    result.update(report=report, tag_bytes=n, freed=asleep - before, alloc_while_asleep=error_of(allocate_in_kv))
    result["last_error"] = gpumem_torch.last_error()
    result["wake"] = alloc.wake("kv")
    result["stats"] = alloc.tag_stats()
    result["same_ptr"] = kv.data_ptr() == ptr
    result["same_content"] = bool(torch.equal(kv.cpu(), kv_expected)) and bool(torch.equal(w.cpu(), w_expected))


def run_graph(result):
    gpumem_torch.enable()
    import torch

    torch.manual_seed(0)
    with gpumem_torch.region("weights"):
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    # The graph's own memory (its static tensors, and the intermediates it freed at the end of
    # capture, which PyTorch's pluggable allocator gives back to gpumem) in a tag that stays awake.
    with gpumem_torch.region("graph"):
        static_in = torch.randn(64, 1024, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(3):
                model(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph), torch.no_grad():
                static_out = model(static_in)
            result["captured"] = True
        except Exception as e:  # noqa: BLE001
            result["captured"] = False
            result["capture_error"] = f"{type(e).__name__}: {e}"
            return
    graph.replay()
    expected = static_out.cpu()
    result["report"] = gpumem_torch.sleep("weights")
    result["wake"] = gpumem_torch.wake("weights")
    graph.replay()
    result["same_output"] = bool(torch.equal(static_out.cpu(), expected))


MODES = {
    "keep": lambda r: run_enabled(r, True),
    "discard": lambda r: run_enabled(r, False),
    "wake_oom": run_wake_oom,
    "mempool": run_mempool,
    "graph": run_graph,
}


def main():
    mode = sys.argv[1]
    result = {"mode": mode}
    try:
        MODES[mode](result)
    except Exception:  # noqa: BLE001
        result["exception"] = traceback.format_exc()
    emit(result)


if __name__ == "__main__":
    main()
