/*
 * libgpumem_torch.so: gpumem's strategies as a PyTorch CUDAPluggableAllocator, with the memory
 * statistics a pluggable allocator otherwise lacks (pytorch/pytorch#133281).
 *
 *   import torch
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator(
 *       "native/build/Release/libgpumem_torch.so", "gpumem_malloc", "gpumem_free")
 *   torch.cuda.memory.change_current_allocator(alloc)   # before CUDA is initialised
 *
 * or, with the statistics, bindings/python/gpumem_torch.py (`gpumem_torch.enable("pool")`).
 *
 * Configuration: environment variables, read once (by gpumem_init, or by the first
 * gpumem_malloc if nobody called gpumem_init). A value that is set but not empty must be valid;
 * an empty value counts as unset.
 *
 *   GPUMEM_ALLOCATOR                cuda | uvm | pool | async                     (default pool)
 *                                   (case-insensitive)
 *     cuda  cudaMalloc / cudaFree for every tensor (cudaFree synchronises the device).
 *     uvm   cudaMallocManaged, prefetched to the device on the allocating stream, capped by
 *           GPUMEM_UVM_LIMIT.
 *     pool  gpumem's caching block pool over cudaMalloc (per-stream free lists, events for
 *           cross-stream reuse, release-and-retry on out-of-memory).
 *     async cudaMallocFromPoolAsync on a cudaMemPool_t owned by the library.
 *   GPUMEM_UVM_PREFETCH             0 | 1          (uvm; default 1: prefetch every allocation)
 *   GPUMEM_UVM_ADVISE               none | device | host                  (uvm; default none)
 *                                   device: cudaMemAdviseSetPreferredLocation(device) and
 *                                   SetAccessedBy(device); host: preferred location the host,
 *                                   accessed by the device (pages stay in host memory, mapped).
 *   GPUMEM_UVM_LIMIT                free | none | SIZE                   (uvm; default free)
 *                                   The most managed memory the library hands out per device.
 *                                   free: the device's free memory when the strategy is created,
 *                                   less 512 MiB; none: no cap (oversubscription allowed).
 *   GPUMEM_ASYNC_RELEASE_THRESHOLD  SIZE   (async; freed bytes the pool keeps at a sync point;
 *                                   default: keep everything)
 *   GPUMEM_POOL_MAX_RESERVED        SIZE   (pool; cap on what the pool takes from cudaMalloc;
 *                                   default: no cap)
 *   GPUMEM_OOM                      raise | null                         (default raise)
 *                                   What gpumem_malloc does when memory runs out; see
 *                                   gpumem_malloc below.
 *
 *   SIZE: a byte count, a non-negative decimal integer with an optional suffix K, M, G or T
 *   (powers of 1024, case-insensitive; "KiB"/"KB" forms also accepted): 1048576, 512M, 4G, 64KiB.
 *
 * Every variable is validated, whichever strategy is chosen. A bad value makes gpumem_init
 * return GPUMEM_TORCH_ERR_CONFIG with a message naming the variable, the value and the accepted
 * form (gpumem_last_error).
 *
 * One strategy instance per device, created on the first allocation for that device
 * (thread-safe). Instances are never destroyed: memory PyTorch still holds at exit is given back
 * by the driver, and frees that arrive during interpreter shutdown find a live allocator.
 *
 * All functions are thread-safe. No C++ exception crosses this interface, with one documented
 * exception: gpumem_malloc under GPUMEM_OOM=raise.
 */
#ifndef GPUMEM_TORCH_H
#define GPUMEM_TORCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GPUMEM_TORCH_API __attribute__((visibility("default")))
#else
#define GPUMEM_TORCH_API
#endif

/* cudaStream_t without the CUDA headers: the same type (driver_types.h). */
struct CUstream_st;
typedef struct CUstream_st* gpumem_stream_t;

/* Return codes. */
#define GPUMEM_TORCH_OK 0
#define GPUMEM_TORCH_ERR_CONFIG 1   /* a bad environment value; nothing was created */
#define GPUMEM_TORCH_ERR_DEVICE 2   /* device index out of range, or no CUDA device */
#define GPUMEM_TORCH_ERR_CUDA 3     /* creating the strategy, or a CUDA call, failed */
#define GPUMEM_TORCH_ERR_ARGUMENT 4 /* a NULL output pointer, an unknown pointer */

/* Version of this interface (the struct below included). */
#define GPUMEM_TORCH_ABI_VERSION 1

/* Statistics of one device's strategy. All byte counts are the sizes PyTorch asked for (a
 * tensor storage's nbytes), not rounded block sizes. */
typedef struct gpumem_torch_stats {
  uint64_t allocated_bytes;      /* bytes PyTorch holds now */
  uint64_t peak_allocated_bytes; /* high-water mark of allocated_bytes since start / reset */
  uint64_t reserved_bytes;       /* bytes the strategy holds from the driver (pool segments,
                                    the async pool's reserve; = allocated for cuda and uvm) */
  uint64_t peak_reserved_bytes;
  uint64_t alloc_count;          /* allocations served (size > 0), cumulative */
  uint64_t free_count;           /* frees served, cumulative */
  uint64_t upstream_alloc_count; /* driver allocations (cudaMalloc, cudaMallocManaged,
                                    cudaMallocFromPoolAsync) */
  uint64_t upstream_free_count;  /* driver frees */
  uint64_t oom_count;            /* gpumem_malloc calls that failed for lack of memory */
  int64_t largest_free_block;    /* pool: largest cached free block; -1 elsewhere */
  uint64_t segment_count;        /* pool: segments held; cuda/uvm: live allocations; async: 0 */
  uint64_t zero_size_count;      /* gpumem_malloc(0) calls (answered with NULL) */
  uint64_t error_count;          /* gpumem_malloc calls that failed for another reason */
  uint64_t bad_free_count;       /* gpumem_free calls the strategy rejected (unknown pointer) */
  uint64_t size_fixup_count;     /* gpumem_free calls whose size differed from the allocated
                                    one and were freed with the allocated size */
  int32_t active;                /* 1 once the device's strategy exists, else 0 */
  int32_t device;
} gpumem_torch_stats;

/* Reads and validates the environment (once; later calls return the first result). Touches no
 * CUDA state. Returns GPUMEM_TORCH_OK or GPUMEM_TORCH_ERR_CONFIG (message: gpumem_last_error). */
GPUMEM_TORCH_API int gpumem_init(void);

/* The calling thread's last error message ("" if none). Valid until the thread's next call. */
GPUMEM_TORCH_API const char* gpumem_last_error(void);

/* The strategy and options in effect, e.g. "strategy=pool pool.max_reserved=none oom=raise".
 * Calls gpumem_init if needed; after a configuration error, "error: <message>". */
GPUMEM_TORCH_API const char* gpumem_config(void);

/* PyTorch's alloc_fn. size 0 returns NULL (PyTorch never frees it). On failure:
 *  - GPUMEM_OOM=raise (default): throws std::runtime_error whose message starts
 *    "gpumem: out of memory" (or "gpumem: " for other failures). PyTorch's CUDAPluggableAllocator
 *    does not check the pointer it gets back, so a NULL would become a tensor at address 0 and
 *    the first kernel touching it would fail with an illegal address; the exception instead
 *    reaches Python as a RuntimeError, as with RMM's allocator.
 *  - GPUMEM_OOM=null: returns NULL and never throws (for C callers that check the result).
 * Either way the message is kept for gpumem_last_error and the failure counted in the stats. */
GPUMEM_TORCH_API void* gpumem_malloc(ssize_t size, int device, gpumem_stream_t stream);

/* PyTorch's free_fn. NULL is ignored. `stream` is the stream the memory was allocated on (what
 * PyTorch passes); the strategy keeps the memory from other streams until work queued there has
 * run. A size that differs from the allocated one is corrected (counted in size_fixup_count);
 * an unknown pointer is counted in bad_free_count and left alone. Never throws. */
GPUMEM_TORCH_API void gpumem_free(void* ptr, ssize_t size, int device, gpumem_stream_t stream);

/* PyTorch's record_stream_fn (settable only from C++: CUDAPluggableAllocator::
 * set_record_stream_fn; the Python CUDAPluggableAllocator does not expose it): `ptr` is used on
 * `stream` too, so its memory is not reused before the work queued there has finished.
 * Returns 0, or GPUMEM_TORCH_ERR_ARGUMENT for a pointer no device's strategy holds. */
GPUMEM_TORCH_API int gpumem_record_stream(void* ptr, gpumem_stream_t stream);

/* Statistics of `device`. A device whose strategy does not exist yet reports zeros with
 * active = 0. Returns 0, GPUMEM_TORCH_ERR_ARGUMENT for out == NULL, GPUMEM_TORCH_ERR_DEVICE
 * for a negative or too large index. */
GPUMEM_TORCH_API int gpumem_stats(int device, gpumem_torch_stats* out);

/* sizeof(gpumem_torch_stats), for bindings that check their copy of the layout. */
GPUMEM_TORCH_API size_t gpumem_stats_size(void);

/* Sets the peaks (allocated, reserved) to the current values. Returns 0 or an error code. */
GPUMEM_TORCH_API int gpumem_reset_peak(int device);

/* Gives cached memory back to the driver (torch.cuda.empty_cache's job): pool releases its free
 * segments, async synchronises the device and trims its pool to 0; nothing to do for cuda and
 * uvm. Memory PyTorch holds is never touched. Returns 0 or an error code. */
GPUMEM_TORCH_API int gpumem_trim(int device);

/* GPUMEM_TORCH_ABI_VERSION. */
GPUMEM_TORCH_API int gpumem_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif /* GPUMEM_TORCH_H */
