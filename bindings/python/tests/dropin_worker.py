"""One PyTorch process for test_dropin_gpu.py: the drop-in shapes over gpumem on a CUDA device. Prints
one line ``GPUMEM_WORKER_RESULT {json}``. Each mode calls gpumem_torch.enable() first, as a framework
does at the start of its process (the cases create CUDA tensors before asking for the shape).

Modes (the first three are vLLM's tests/basic_correctness/test_cumem.py cases against TaggedPool):
  pool_error     test_python_error: 70% of the device in a pool, slept; 70% more allocated outside;
                 wake_up raises a RuntimeError (gpumem's OutOfMemoryError) and the pool stays asleep;
                 once that memory is freed, wake_up works. The pool's tensor is in a discarded tag
                 (vLLM's keeps it: 98 GiB of pinned host memory on an H200; the case is about the wake)
  pool_basic     test_basic_cumem: tensors outside and inside the pool used together before and after
                 sleep and wake_up; sleep frees device memory
  pool_graph     test_cumem_with_cudagraph: a CUDA graph over a kept weight and a discarded cache
                 replays after sleep and wake_up
  saver_states   the saver's bad transitions on a device: pause of a paused tag and resume of an awake
                 one are InvalidStateError (the process lives on), content kept and discarded as asked,
                 get_cpu_backup a CPU copy of a paused backed-up tensor, None otherwise
  saver_graph    a CUDA graph captured in saver.cuda_graph(tag="graph"): its tag pauses (the 400 MB
                 intermediate it freed at the end of capture released with it) and resumes with the
                 KV cache, a tensor allocated while both are paused, and the graph replays with the
                 expected output
"""

import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bindings/python

import gpumem_torch  # noqa: E402
from sleep_worker import MiB, emit, error_of, free_bytes  # noqa: E402  (the sleep tests' worker: one result protocol)


def pool_error(torch, out):
    from gpumem_torch.tagged_pool import TaggedPool

    allocator = TaggedPool.get_instance()
    alloc_bytes = int(torch.cuda.mem_get_info()[1] * 0.7)
    tensors = []
    with allocator.use_memory_pool(tag="discard"):
        tensors.append(torch.empty(alloc_bytes, dtype=torch.uint8, device="cuda"))
    allocator.sleep()
    y = torch.empty(alloc_bytes, dtype=torch.uint8, device="cuda")
    out["wake_error"] = None
    try:
        allocator.wake_up()
    except RuntimeError as e:  # vLLM's test: pytest.raises(RuntimeError)
        out["wake_error"] = [type(e).__name__, str(e)]
        out["is_torch_oom"] = isinstance(e, torch.OutOfMemoryError)
    out["still_asleep"] = [s["asleep"] for s in gpumem_torch.tag_stats() if s["tag"] == "pool:discard"]
    del y
    gpumem_torch.empty_cache()
    out["wake_after_room"] = error_of(allocator.wake_up)
    tensors[0].fill_(5)
    out["usable"] = int(tensors[0][-1].item()) == 5


def pool_basic(torch, out):
    from gpumem_torch.tagged_pool import TaggedPool

    shape = (1024, 1024)
    x = torch.empty(shape, device="cuda")
    x.zero_()
    allocator = TaggedPool.get_instance()
    with allocator.use_memory_pool():
        y = torch.empty(shape, device="cuda")
        y.zero_()
        y += 1
        z = torch.empty(shape, device="cuda")
        z.zero_()
        z += 2
    output = x + y + z
    out["before"] = bool(torch.allclose(output, torch.ones_like(output) * 3))
    out["usage"] = allocator.get_current_usage()
    free = free_bytes(torch)
    allocator.sleep()
    out["freed"] = free_bytes(torch) - free
    allocator.wake_up()
    output = x + y + z
    out["after"] = bool(torch.allclose(output, torch.ones_like(output) * 3))


def pool_graph(torch, out):
    from gpumem_torch.tagged_pool import TaggedPool

    allocator = TaggedPool.get_instance()
    with allocator.use_memory_pool():
        weight = torch.eye(1024, device="cuda")
    with allocator.use_memory_pool(tag="discard"):
        cache = torch.empty(1024, 1024, device="cuda")

    def model(x):
        result = x @ weight
        cache[: result.size(0)].copy_(result)
        return result + 1

    x = torch.empty(128, 1024, device="cuda")
    model(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = model(x)
    free = free_bytes(torch)
    allocator.sleep()
    out["freed"] = free_bytes(torch) - free
    allocator.wake_up()
    x.random_()
    graph.replay()
    out["cache"] = bool(torch.allclose(x, cache[: x.size(0)]))
    out["output"] = bool(torch.allclose(y, x + 1))


def saver_states(torch, out):
    from gpumem_torch.saver import memory_saver as saver

    saver.hook_mode = "torch"
    with saver.region(tag="weights", enable_cpu_backup=True):
        weights = torch.full((64 * MiB,), 7, dtype=torch.uint8, device="cuda")
    with saver.region(tag="kv_cache"):
        kv = torch.full((256 * MiB,), 9, dtype=torch.uint8, device="cuda")
    ptr = kv.data_ptr()
    free = free_bytes(torch)
    saver.pause("kv_cache")
    out["freed_kv"] = free_bytes(torch) - free
    out["pause_paused"] = error_of(lambda: saver.pause("kv_cache"))
    out["resume_awake"] = error_of(lambda: saver.resume("weights"))
    out["pause_unknown"] = error_of(lambda: saver.pause("never_used"))
    saver.pause("weights")
    backup = saver.get_cpu_backup(weights)
    out["backup"] = backup is not None and bool((backup == 7).all().item()) and backup.device.type == "cpu"
    out["no_backup"] = saver.get_cpu_backup(kv) is None  # paused without enable_cpu_backup
    saver.resume()
    out["after_resume"] = saver.get_cpu_backup(weights) is None
    out["same_ptr"] = kv.data_ptr() == ptr
    out["weights_kept"] = bool((weights == 7).all().item())
    kv.fill_(1)
    out["kv_usable"] = int(kv.sum().item()) == 256 * MiB
    out["resume_resumed"] = error_of(saver.resume)


def saver_graph(torch, out):
    from gpumem_torch.saver import memory_saver as saver

    saver.hook_mode = "preload"
    with saver.region(tag="kv_cache"):
        kv = torch.full((5, 100_000_000), 1, dtype=torch.float32, device="cuda")
    static_input = torch.zeros((5,), dtype=torch.float32, device="cuda")

    def fn():
        value = (static_input + kv.mean(dim=1)).mean()
        return (torch.ones((100_000_000,), device="cuda") * value).mean()

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with saver.cuda_graph(graph, tag="graph"):
        static_output = fn()
    static_input[...] = 100
    graph.replay()
    out["first"] = float(static_output.item())
    free = free_bytes(torch)
    saver.pause("kv_cache")
    out["freed"] = free_bytes(torch) - free
    saver.pause("graph")
    out["graph_freed"] = free_bytes(torch) - free - out["freed"]
    other = torch.ones((500_000_000,), dtype=torch.uint8, device="cuda")  # outside every region
    del other
    saver.resume("graph")
    saver.resume("kv_cache")
    kv[...] = 2
    static_input[...] = 200
    graph.replay()
    out["second"] = float(static_output.item())


MODES = {f.__name__: f for f in (pool_error, pool_basic, pool_graph, saver_states, saver_graph)}


def main():
    mode = sys.argv[1]
    out = {"mode": mode}
    try:
        gpumem_torch.enable()
        import torch

        MODES[mode](torch, out)
    except Exception:  # noqa: BLE001
        out["exception"] = traceback.format_exc()
    emit(out)


if __name__ == "__main__":
    main()
