"""The checks that tools which shrink a batch on out-of-memory apply to an exception, copied so that
the tests can tell whether gpumem's errors pass them (the tools themselves are not installed here).

- should_reduce_batch_size: Hugging Face accelerate, src/accelerate/utils/memory.py (used by
  find_executable_batch_size). Older releases look for "CUDA out of memory.", newer ones for
  " out of memory."; both statements are kept.
- is_oom_error / is_cuda_out_of_memory: Lightning, src/lightning/pytorch/utilities/memory.py (used by
  the batch-size finder and garbage_collection_cuda).
"""


def accelerate_should_reduce_batch_size(exception: BaseException) -> bool:
    statements = [
        "CUDA out of memory.",  # older accelerate
        " out of memory.",  # newer accelerate
        "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.",
        "DefaultCPUAllocator: can't allocate memory",
    ]
    if isinstance(exception, RuntimeError) and len(exception.args) == 1:
        return any(s in exception.args[0] for s in statements)
    return False


def lightning_is_cuda_out_of_memory(exception: BaseException) -> bool:
    return (
        isinstance(exception, RuntimeError)
        and len(exception.args) == 1
        and "CUDA" in exception.args[0]
        and "out of memory" in exception.args[0]
    )


def lightning_is_oom_error(exception: BaseException) -> bool:
    cudnn = (
        isinstance(exception, RuntimeError)
        and len(exception.args) == 1
        and "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED." in exception.args[0]
    )
    cpu = (
        isinstance(exception, RuntimeError)
        and len(exception.args) == 1
        and "DefaultCPUAllocator: can't allocate memory" in exception.args[0]
    )
    return lightning_is_cuda_out_of_memory(exception) or cudnn or cpu


def accepted_by_all(exception: BaseException) -> dict:
    return {
        "accelerate.should_reduce_batch_size": accelerate_should_reduce_batch_size(exception),
        "lightning.is_oom_error": lightning_is_oom_error(exception),
        "lightning.is_cuda_out_of_memory": lightning_is_cuda_out_of_memory(exception),
    }
